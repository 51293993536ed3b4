/* vescale.h - v0.1.0 (2026-11-23) - nD-parallel training for C/C++ trainers: one
   device mesh for data, tensor/sequence, pipeline parallel and ZeRO, over threads,
   MPI or NCCL. Header-only C99. MIT license (end of file).

   This header includes every part:
       vescale_mesh.h   results, hooks, dtypes, transports, bootstrap, device mesh,
                        layouts and redistribute, TP/SP regions, sharded init
       vescale_ddp.h    DDP and the distributed optimizer (ZeRO-1/2/3, HSDP)
       vescale_pipe.h   pipeline stages, schedules as data, validator, simulator, engine
       vescale_ckpt.h   checkpoints of the whole training state, resharding on load
   and, here, the high-level API (// >>model, >>plan, >>generate-plan, >>train,
   >>data): a model declared once as layers, plans, vs_generate_plan,
   vs_parallelize, vs_train_step, save and resume on any mesh, and a data
   loader of token shards that resumes with it. examples/train_gpt.c is the
   whole of it in use (make run; --data DIR/GLOB trains from shards).

   Topics (grep the markers):
       // >>model          layers, parameters, roles, the layer context (vs_layer_*)
       // >>plan           sharding plans: text and JSON, checks, defaults (vs_plan_resolve)
       // >>generate-plan  the machine's profile, the planner, its explanation
       // >>train          vs_parallelize, vs_train_step, save and load
       // >>data           vs_data_*: token shards (llm.c's format) read by DP rank, shuffled
                           by epoch, read ahead on a thread, its position saved with the state

   Do this in *one* C or C++ file:
       #define VESCALE_IMPLEMENTATION
       #include "vescale.h"
   and just #include "vescale.h" everywhere else. Or define VESCALE_STATIC (before
   the include, in every file that includes it): it implies VESCALE_IMPLEMENTATION
   and makes every function static inline, nothing exported. Each file then has
   its own copy of the library; pass no handle from one file to another.

   Platforms: POSIX.1-2008 with pthreads (tested on Linux/glibc), a C99 or C++11
   compiler; VESCALE_MPI: an MPI-3 library with MPI_THREAD_MULTIPLE; VESCALE_NCCL:
   CUDA 12+ (cudaLibraryLoadData) and NCCL 2.18+ (ncclCommSplit), any C compiler
   (nvcc not needed).

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

   High-level API, step by step (examples/train_gpt.c does exactly this):

       vs_layer_decl layers[] = { { .unit = { .name = "h.0.mlp", .inputs = "x0", .outputs = "x1",
                                              .forward = mlp_fwd, .backward = mlp_bwd, .flops = 1e6 },
                                    .params = { { .name = "h.0.mlp.fc", .ndim = 2, .shape = {64, 256},
                                                  .role = VS_ROLE_COLUMN,
                                                  .init = { .kind = VS_INIT_NORMAL, .b = 0.02 } } },
                                    .nparams = 1 }, ... };

       vs_model_desc model = { layers, n, 1234 };      // the seed of every parameter's init
       vs_plan plan = { .pp = 2, .dp = 2, .tp = 2, .schedule = VS_PIPE_1F1B, .zero = VS_ZERO_1 };
       vs_train* t;                                     // collective, on every rank:
       vs_parallelize(world, &(vs_train_desc){ .model = &model, .plan = &plan }, &t);
       for (...) vs_train_step(t, &global_batch, &loss);

   In a layer's callbacks vs_layer(call) gives its shards (param[i]), the
   gradient views to add into (grad[i]) and the TP submesh (tp).

   Layouts. Roles give the Megatron layout; plan rules (glob patterns) override
   them; a sharded dim splits in whole blocks of the parameter's shard_unit (a
   head's width: TP must divide the heads).
   - COLUMN: weight [in, out] Shard(1), bias Shard(0) (a 1-D COLUMN parameter:
     a column-parallel bias, Shard(0) over TP)
   - ROW: weight Shard(0), bias replicated (added once, after the reduction)
   - EMBEDDING: Shard(0); HEAD: Shard(1)
   - A name declared by two layers is one tied parameter (an embedding and an
     LM head): its two gradients are summed in the same order whether the
     layers share a stage or not.

   Sequence parallelism (plan.sequence_parallel): the activations between
   layers are split over TP along the sequence (vs_layer_ctx.sp says so;
   gather and reduce-scatter with vs_sp_*), and DDP sums the TP-replicated
   parameters' gradients over TP. Every layer must declare that it does so
   (vs_layer_decl.sp_ok = 1), else the plan is refused naming the layer (one
   that computes on its part of the sequence as if it were the whole drifts
   silently).

   Planning. A profile calibrates vs_generate_plan:
   - vs_profile_measure: layer, optimizer and transport times, and the layers
     TP-sharded in place
   - vs_profile_describe for people, vs_profile_print exact, to save
   - vs_plan_explain says why the planner chose; vs_plan_explain_for how the
     plan that runs compares when the caller fixed some of it
   - ZeRO-3 (plan.zero 3) and HSDP (plan.dp_shard: shards within a host,
     replicas across) are planned: ZeRO-3 weighed under a memory limit, HSDP
     given the hosts (vs_constraints.node_ranks, inter_bw_bytes_s); and
     vs_parallelize builds them (a ready group a layer, gathered and released
     by the pipeline's unit hooks in every schedule: at vs_parallelize)

   The batch and the loss. The global batch holds the model's data inputs with
   the rows first; each DP rank takes its rows, each microbatch its part. The
   loss layer returns the mean over the rows it was given (its microbatch);
   vs_train_step averages those means over the microbatches and DP ranks, so a
   step's loss and gradients are the global batch's mean whatever the mesh.

   Results equal one rank's within float rounding; bit for bit where only PP
   differs and the microbatch count is the same (the sums then run in the same
   order).

   Precision. Parameters are f32, bf16 or f16 (vs_param_decl.dtype); fp32
   masters and moments; vs_train_desc.grad_fp32; f16 loss scaling with
   vs_train_desc.loss_scale.

   Limits: ZeRO-2 keeps a staging buffer per bucket (a pipeline holds every
   bucket of a chunk open across microbatches).

   On GPUs (VESCALE_NCCL, a world on the NCCL transport: vs_launch_ex with
   VS_TRANSPORT_NCCL, or vs_world_init): parameters, gradients and activations
   are device memory.
   - One compute stream a rank (vs_train_desc.stream, or one the state
     creates). The layers run on it (vs_pipe_call.stream: launch your kernels
     there and nothing else is needed), and so do the pipeline's copies, DDP's
     kernels and the TP communicator's collectives: vs_tp_* and vs_sp_* calls
     in a layer are in order with its kernels.
   - The DP reductions wait for the backward that wrote them (events).
   - Shards are initialized on the device (vs_init_fill).
   - The batch (host memory, pinned for asynchronous copies, or device memory)
     is copied to the device on the compute stream.
   - A tied parameter's two gradients are added by a kernel; one tied across
     stages is exchanged and added in stream order.
   - The loss's DP mean is taken on the device and read with the gradient norm.
   - A steady-state step makes one host wait, no device allocation and no CUDA
     event: the pipeline leaves the losses on the device
     (vs_pipe_desc.defer_loss), and its activations travel without shape
     headers (fixed_shapes: every step's batch has the first one's shape
     unless vs_train_desc.variable_shapes).
   - vs_train_get_param, save and load stage through device memory.

   Non-finite gradients and the step counter
   -----------------------------------------
   Every vs_train_step takes the global gradient norm, with or without
   desc.clip: one pass over each rank's gradients and one all-reduce of one
   double, over every gradient element of the model (DP, TP and PP, ZeRO
   shards, and every copy of a replicated one). So a NaN or inf anywhere is
   seen by every rank, and all decide alike. desc.nonfinite
   (vs_nonfinite_policy):
   - VS_NONFINITE_SKIP (0, the default): the step is skipped on every rank
     (parameters, optimizer state, step count and LR schedule as they were);
     VS_OK; counted (vs_train_skipped_steps) and logged at warn
   - VS_NONFINITE_ERROR: VS_ERR_NONFINITE naming the step and the policy,
     nothing changed
   vs_train_grad_norm gives the last norm.

   One step counter: vs_train_steps is DDP's count, AdamW's bias correction and
   the LR schedule's position (a skipped step does not advance it); the data
   position is vs_train_steps + vs_train_skipped_steps. vs_train_save stores
   both, vs_train_load restores them exactly.

   Ownership and lifetimes: the training state owns its mesh, pipe, schedule,
   DDP and checkpointer. vs_train_mesh, vs_train_pipe and vs_train_ddp are for
   the lower-level calls; vs_mesh_free, vs_pipe_free and vs_ddp_free on them are
   VS_ERR_STATE and leave the state working; vs_train_free frees them. A second
   vs_train_free, or a call on a freed training state (likewise a freed
   schedule, pipe or checkpointer), is VS_ERR_STATE while its world keeps the
   memory (its last 16 freed such handles, vs_free_later; a schedule made with
   a NULL world: the freeing thread's last 16); past that window the call is
   undefined. A DDP cannot tell it was freed.

   Memory, errors and logging, threads and streams, layouts and tensor
   parallelism (a Megatron MLP by hand): vescale_mesh.h's top comment.
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
    /* f32 (0), bf16 or f16: the shards the layers read are in this dtype, the
       optimizer steps fp32 master weights (vescale_ddp.h), gradients are in it
       too unless vs_train_desc.grad_fp32 */
    vs_dtype dtype;
    int ndim;
    int64_t shape[VS_TENSOR_MAX_DIMS]; // global shape
    vs_role role;
    vs_init_desc init; // how it starts (vs_init_fill; seed and name are vescale's: the model seed and this name)
    int no_decay;      // no weight decay (norms, biases)
    /* The sharded dim splits only in whole blocks of this many (an attention
       weight: one head's width, so that TP must divide the heads, not only the
       dim); 0 or 1: any split. vs_plan_check and the planner refuse a TP size
       that cuts a block. */
    int64_t shard_unit;
} vs_param_decl;

/* One layer: a pipeline unit (vescale_pipe.h: its named inputs and outputs,
   callbacks and cost; its user pointer is vescale's, see vs_layer_user) and the
   parameters it owns. */
typedef struct vs_layer_decl {
    vs_pipe_unit unit;
    vs_param_decl params[VS_LAYER_MAX_PARAMS];
    int nparams;
    void* user; // the layer's own pointer (vs_layer_user)
    /* 1: the layer handles sequence-parallel activations (vs_layer_ctx.sp: its
       inputs and outputs are its TP rank's part of the sequence, and it
       gathers and reduce-scatters around its TP-sharded work itself). A
       layer that does not would compute on a part of the sequence as if it
       were the whole (norms, attention, its gradients: a silent drift), so a
       plan with sequence_parallel is refused (vs_plan_check, vs_parallelize,
       vs_generate_plan) naming the first layer that leaves this 0. */
    int sp_ok;
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
    /* param[i]'s dtype (vs_param_decl.dtype) and grad[i]'s: the same, or f32 for
       a bf16/f16 parameter with vs_train_desc.grad_fp32 */
    vs_dtype dtype[VS_LAYER_MAX_PARAMS], grad_dtype[VS_LAYER_MAX_PARAMS];
    /* 1: sequence parallelism (vs_plan.sequence_parallel with tp_size > 1). The
       activations a layer gets and gives are its rank's 1/tp_size of the
       sequence (rows [tp_rank, tp_rank + 1) x T / tp_size of each sample); the
       gradients of its TP-replicated parameters come from those rows only
       (DDP sums them over TP). */
    int sp;
} vs_layer_ctx;

static inline vs_layer_ctx* vs_layer(const vs_pipe_call* call) { return (vs_layer_ctx*)call->user; }

/* The same, one field at a time, for a layer callback in any source file (each
   is NULL, or VS_ERR_NULL, when call is NULL or not a layer's call (its user
   pointer NULL), and NULL or VS_ERR_INVALID for a parameter index outside
   0..VS_LAYER_MAX_PARAMS-1; vs_last_error says which). */
VS_API void* vs_layer_user(const vs_pipe_call* call);         // vs_layer_decl.user
VS_API void* vs_layer_param(const vs_pipe_call* call, int i); // this rank's shard of parameter i
VS_API void* vs_layer_grad(const vs_pipe_call* call, int i);  // where its gradient is added
/* Parameter i's box: local_shape and offset (VS_TENSOR_MAX_DIMS each; either may
   be NULL) in the global tensor. */
VS_API vs_result vs_layer_param_box(const vs_pipe_call* call, int i, int64_t* local_shape, int64_t* offset);
VS_API vs_mesh* vs_layer_tp(const vs_pipe_call* call); // the TP submesh, NULL without TP

/* Data inputs. A layer's input that no earlier layer makes is a data input:
   the batch input of that name (vs_batch; vs_profile_measure's data
   callback). Its placement is vescale's, not the plan's:
   - rows (dim 0) split over the DP ranks, then over the microbatches
   - the same rows on every TP rank of a DP coordinate (Replicate over TP: the
     layers' TP collectives need them alike, with sequence_parallel too) and
     on every stage that takes it (each stage loads its own)
   Its spec is optional ("tokens", or "tokens:i32[*,1024]"):
   - without one it is taken as the batch gives it: the batch states its dtype
     and shape, and one model serves batches of other shapes (another sequence
     length, an evaluation's rows); what the layer reads is the layer's to check
   - with one, each microbatch is checked against it (VS_ERR_MISMATCH naming
     the layer and the input)
   Its takers' specs must agree, and no later layer may make it (below). */

/* Checks a model without a mesh:
   - names, shapes, roles; tied parameters agree; sp_ok 0 or 1; every layer
     has a forward
   - the specs of a tensor's maker and takers agree (VS_ERR_MISMATCH naming
     both layers), and a data input's takers' specs agree with each other
   - a data input that a later layer makes is VS_ERR_INVALID naming both (a
     layer's inputs come from earlier layers or the batch)
   - each parameter's f32 bytes, and the model's, fit an int64 */
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
    int chunks;                   // virtual chunks per stage (0: the schedule's: 2 for interleaved, zbv, dualpipev; else 1)
    vs_pipe_kind schedule;        // 0: 1f1b
    int microbatches;             // per DP rank and step (0: pp, at least 1)
    vs_zero_stage zero;
    /* Sequence parallelism (megatron, tp > 1; a no-op at tp 1): the activations
       between layers are split over TP along the sequence, so norms and
       residuals see 1/tp of the rows, and the layers gather and reduce-scatter
       around their column/row pairs instead of all-reducing (vs_sp_*). Every
       parameter replicated over TP then gets a partial gradient (from its
       rank's rows) that DDP sums over TP (a Partial placement along TP). The
       layers learn it from vs_layer_ctx.sp; each must declare that it
       handles it (vs_layer_decl.sp_ok), at any TP size, so a plan that runs
       on one mesh runs on all. */
    int sequence_parallel;
    /* Activation recompute: layer names or globs, blank-separated (e.g.
       "h.*"), whose activations are not kept between forward and backward but
       made again by a second forward before the backward
       (vs_pipe_unit.recompute: bit for bit the same gradients, for one more
       forward's time; what a layer keeps with vs_pipe_save is the memory
       saved). A pattern that matches no layer is an error (vs_plan_check). */
    char recompute[256];
    /* ZeRO-3 and HSDP (issue 34; vescale_ddp.h's VS_ZERO_3, zero = 3):
       - dp_shard: HSDP, the shard group's size (a divisor of dp; the mesh is
         PP x DPR x DPS x TP with DPS = dp_shard, DPR = dp / dp_shard replicas).
         ZeRO-1/2/3 shard within DPS and all-reduce the owned shard over DPR;
         ZeRO-0 all-reduces over both. 0: no HSDP (dp_shard = dp is the same);
         1: DPS1, every rank a replica holding everything (DDP's memory).
       - reshard_after_forward (0 or 1; 0 and not _set: 1): ZeRO-3 frees a
         group's gathered parameters after its forward and gathers again in
         its backward; 0 keeps them from the first forward to the last
         backward of the step (one gather a step, the stage's parameters whole).
       - prefetch (>= 0; 0 and not _set: 1): groups gathered ahead of the one
         that computes.
       Other stages ignore reshard_after_forward and prefetch. */
    int dp_shard;
    int reshard_after_forward, reshard_after_forward_set;
    int prefetch, prefetch_set;
} vs_plan;

/* The plan as text or JSON; snprintf-like: returns the length needed (buf may
   be NULL when cap is 0).
   - text: one "key: value" per line; a rule is a line "shard: <pattern>
     <placement>", e.g. "shard: h.*.attn.wq Shard(1)", in the order they apply
   - the keys are the fields' names but for the sizes, one key: "mesh: PP=1
     DP=4 TP=1" (all three; JSON "mesh": {"pp": 1, "dp": 4, "tp": 1}) and the
     rules (JSON "rules": [{"pattern": ..., "placement": ...}]); a line
     whose first non-blank is '#' is a comment. E.g. "mesh: PP=1 DP=8 TP=1\nzero: 3\n
     dp_shard: 4\n" or {"mesh": {"pp": 1, "dp": 8, "tp": 1}, "zero": 3, "dp_shard": 4}
   - dp_shard, reshard_after_forward and prefetch print when set (a value
     other than 0, or its _set flag): "dp_shard: 8", JSON "dp_shard": 8
   - strings (rule patterns and placements, split_points): UTF-8 without
     quotes, backslashes or control characters, and a pattern holds no blank.
     So both forms carry them as they are, JSON output is valid UTF-8, and what
     prints parses back to the same plan.
   - -1 and vs_last_error, nothing printed: a plan outside that, a field out of
     range (as vs_plan_check says), a NULL plan, or buf NULL with cap > 0 */
VS_API int vs_plan_print(const vs_plan* p, char* buf, size_t cap);
VS_API int vs_plan_print_json(const vs_plan* p, char* buf, size_t cap);
/* Either form; errors name the line and the key.
   - each key once (shard, a rule, as often as there are rules); at least one
     key (an empty or comment-only text is an error)
   - values without their leading and trailing blanks
   - the strings as vs_plan_print says: a byte that is not UTF-8 is an error,
     not an escape (JSON "\u00e9" is the character, parsed to its UTF-8 bytes)
   - JSON numbers are integers
   The text and JSON print each default as it resolves (vs_plan_resolve): a
   plan with split 0 prints "split: flops" (or "manual" with split_points),
   chunks 0 the schedule's count. */
VS_API vs_result vs_plan_parse(const char* text, vs_plan* out);
/* The plan as vs_parallelize runs it, every 0 default made explicit: mesh sizes
   (1), schedule (1f1b), chunks (2 for zbv and dualpipev, else 1), microbatches
   (pp), split (manual with split_points, else flops; vs_parallelize cuts a
   model whose layers declare no flops uniformly), and under zero 3
   reshard_after_forward and prefetch (1 each, _set 1). Other fields are
   copied. *out may be p. */
VS_API vs_result vs_plan_resolve(const vs_plan* p, vs_plan* out);
/* vs_plan_check: the plan against the model. It refuses:
   - a field out of its range (nothing is coerced to a default): policy,
     split, schedule, zero not their enums (zero 0..3); chunks or
     microbatches < 0; strict or sequence_parallel not 0 or 1; PP x DP x TP
     past an int; the strings not as vs_plan_print says; dp_shard < 0 or not
     dividing dp; reshard_after_forward not 0 or 1; prefetch < 0; a _set flag
     not 0 or 1
   - a strict rule that matches nothing
   - a TP size that does not divide a sharded dim (the first such parameter)
   - more stages x chunks than layers
   - sequence_parallel with a layer that does not declare sp_ok
   vs_plan_placement: a parameter's placement along TP under the plan, and why
   (the rule or the role). */
VS_API vs_result vs_plan_check(const vs_plan* p, const vs_model_desc* m);
VS_API vs_result vs_plan_placement(const vs_plan* p, const vs_param_decl* d, vs_placement* out, const char** why);

// >>generate-plan ---------------------------------------------------------------

/* All-reduce times a profile can hold: up to VS_PROFILE_AR_GROUPS group sizes, each
   at the VS_PROFILE_AR_SIZES message sizes 4 B, 64 KiB, 512 KiB and 4 MiB. */
#define VS_PROFILE_AR_GROUPS 6
#define VS_PROFILE_AR_SIZES 4

/* What the machine does, measured (vs_profile_measure) or given: seconds per flop
   of unit compute, the host's fixed costs, the optimizer, and the transports.
   Every field 0 means "not known": the planner then uses the default named. */
typedef struct vs_profile {
    double flop_s;        // seconds per flop of the model's compute (0: 1e-10)
    double bw_bytes_s;    // collective bandwidth, bytes/s (0: 1e9)
    double latency_s;     // per collective call (0: 2e-5)
    double p2p_bw_bytes_s;   // point-to-point (0: bw)
    /* Host time that does not scale with flops (0: none): call_s per layer
       callback call (the call and what a device's kernel launch or a sleep's
       wake-up adds), instr_s per compute instruction of the pipe engine (F, B,
       W: its dispatch, buffers, the data callback). */
    double call_s;
    double instr_s;
    double opt_s;         // the optimizer step (AdamW) per parameter element a rank steps (0: none)
    /* Measured all-reduce times (0: not measured): ar_s[g][k] is one f32
       all-reduce of size k (4 B, 64 KiB, 512 KiB, 4 MiB) within groups of ar_n[g]
       consecutive ranks, every group of the world at once (as TP and DP groups
       run). The planner interpolates between the sizes, extends the last two
       linearly beyond 4 MiB, and uses bw and latency for a group size not here. */
    int ar_n[VS_PROFILE_AR_GROUPS];
    double ar_s[VS_PROFILE_AR_GROUPS][VS_PROFILE_AR_SIZES];
    /* Measured in place (0: not measured): tp_s[g] is what the TP collectives
       a layer makes cost beyond their ar_s time, in seconds per byte they
       move, on TP groups of ar_n[g] ranks. The model's layers run TP-sharded
       on every rank at once; their time, less the compute flop_s and call_s
       account for and less the table's all-reduces, is divided by the bytes
       those all-reduce.

       It holds what the table's calls on one warm buffer miss: fresh
       activation buffers (their first touch: page faults on the host), ranks
       arriving from their own work, the layer's work that does not shrink
       with TP. Negative when the layers run faster. */
    double tp_s[VS_PROFILE_AR_GROUPS];
    /* Measured (0: not measured): the share of a split layer's backward
       (backward_input B and backward_weight W, timed apart) that W takes,
       over the model's split layers. The planner gives a split layer's
       backward 2 x its forward, (1 - w_share) of it to B and w_share to W;
       0 is half each (B = W = forward). In [0, 1). It matters to zero-bubble
       schedules, which fill their bubbles with W and whose layers' gradients
       are ready at the end of their W. */
    double w_share;
} vs_profile;

/* Measures a profile: the model's layers' forward and backward times (one
   microbatch from the data callback `data`, every rank at once, as a job runs
   them; a layer with both split backward parts runs them, timed apart:
   w_share), the optimizer's step, and the world's all-reduce (per group size and
   message size) and p2p times, and the layers once more TP-sharded for each
   group size (tp_s). data is required (the layers' data inputs), the model
   is checked (vs_model_check). Collective over the world; every rank gets the
   same profile. */
VS_API vs_result vs_profile_measure(vs_world* w, const vs_model_desc* m, vs_pipe_fn data, void* data_user,
                                    vs_profile* out);
/* The profile as one line of "key=value" (about 1.2 KB at most) that
   vs_profile_parse reads back bit for bit: every number with 17 significant
   digits, so a profile saved (with a checkpoint, in a file) and reused plans
   exactly as the run that measured it. For files and tools; people read
   vs_profile_describe. Both snprintf-like: the length needed; print gives -1
   (vs_last_error) for a profile parse would refuse (a figure NaN, infinite or
   negative, a group size 1 or twice). Parse: each key once. */
VS_API int vs_profile_print(const vs_profile* p, char* buf, size_t cap);
VS_API vs_result vs_profile_parse(const char* text, vs_profile* out);
/* The profile for people, a few lines of rates and times with 3 significant
   digits ("compute 22.6 GFLOP/s; ...", "all-reduce of 4 B, 64 KiB, 512 KiB,
   4 MiB: 2 ranks 9.3 us, ..."), each field 0 shown as the default the planner
   takes for it. Does not parse back. */
VS_API int vs_profile_describe(const vs_profile* p, char* buf, size_t cap);

typedef struct vs_constraints {
    int world;                 // required: ranks
    int pp, dp, tp;            // fixed sizes (0: free)
    vs_pipe_split_kind split;  // 0: flops
    vs_tp_policy policy;
    double mem_limit_bytes;    // per rank (0: none)
    int microbatches;          // per DP rank (0: free)
    int64_t global_batch;      // rows per step (required)
    int64_t act_bytes_per_row; // activation bytes a layer keeps per row per microbatch (0: 4 * largest param dim)
    int sequence_parallel;     // 1: plans with tp > 1 use it (their activations count 1/tp)
    /* Activation recompute of every layer (vs_plan.recompute "*"): 0 the
       planner weighs both when there is a memory limit (recompute costs a
       forward, so it wins only where the limit rules the rest out; without a
       limit it never would, and is not estimated), 1 always, -1 never. */
    int recompute;
    /* The machine's hosts, which vs_profile_measure does not see (0: the world
       is one host): node_ranks ranks a host (consecutive world ranks), and the
       bandwidth of a collective whose group spans hosts (bytes/s per rank;
       0: the profile's bw). With them the DP collectives that cross hosts
       run at inter_bw_bytes_s, and the planner weighs HSDP (vs_plan.dp_shard)
       with its shard groups within a host. */
    int node_ranks;
    double inter_bw_bytes_s;
    /* ZeRO-3 (its HSDP form too): 0 the planner weighs it when there is a
       memory limit (it buys memory with traffic, 1.5 x an all-reduce's a
       microbatch, whose speed rests on the overlap the model grants it; without
       a limit it is not estimated), 1 always, -1 never. */
    int zero3;
    /* 1: gradients in f32 (vs_train_desc.grad_fp32): the DP collectives that
       reduce them, and their memory, count 4 bytes an element, not the
       parameter's dtype's */
    int grad_fp32;
    /* Bytes a row of a unit's output whose spec leaves a dim after the first
       free ("x:f32[*,*,1024]": a sequence of any length): the tensor a stage
       sends on, a TP all-reduce moves, a recomputed layer keeps (0:
       act_bytes_per_row, what a layer keeps in all, which is often far more:
       a GPT's attention probabilities beside its T x D output) */
    int64_t msg_bytes_per_row;
} vs_constraints;

/* One configuration as the planner saw it. Its plan has every default explicit
   (vs_plan_resolve). */
typedef struct vs_plan_estimate {
    vs_plan plan;
    double step_s, compute_s, comm_s, bubble_s; // estimated step time and its parts (exposed)
    double mem_bytes;                           // per rank: params, grads, optimizer state, activations
    /* mem_bytes's parts (on the stage that needs most); ZeRO-3's params and
       grads hold the owned shards plus, at peak, the gathered groups and one
       group's gradients */
    double mem_params, mem_grads, mem_optim, mem_act;
    int feasible;
    char why[256];                              // "<plan>: why it lost" or why it is infeasible
} vs_plan_estimate;

/* Enumerates every (pp, dp, tp, schedule, microbatches, zero, HSDP shard size)
   meeting the constraints, estimates each with the cost model (compute, exposed
   communication, the pipe simulator's bubble, memory), and returns the best in
   *out; est[0..cap) gets the best and the runners-up, then the rejected (with
   their reasons), *n how many. No configuration: VS_ERR_INVALID saying which
   resource is short and by how much. The model is checked (vs_model_check);
   sequence_parallel needs every layer's sp_ok (unless tp is fixed at 1); a
   profile whose figures make the estimates overflow is an error naming them. */
VS_API vs_result vs_generate_plan(const vs_model_desc* m, const vs_constraints* c, const vs_profile* prof,
                                  vs_plan* out, vs_plan_estimate* est, int cap, int* n);
/* The explanation of vs_generate_plan's est[0..n):
   - the chosen plan ("chosen: PP2 x DP2 x TP2, gpipe, 1 chunk per stage, 4
     microbatches, ZeRO-2, split flops"), its step's parts and its memory's
   - a ZeRO-3 choice: what ZeRO-1 and 2 would need ("it fits only with
     parameters sharded: ZeRO-1 needs 22.1 GB a rank" when they do not fit);
     HSDP: the same sharded over every DP rank
   - the two runners-up and why each lost, the others grouped by why
   snprintf-like: returns the length needed
   (buf may be NULL when cap is 0); n = 0 says "no configurations". -1
   (vs_last_error) for est NULL with n > 0, n < 0, or an estimate
   vs_generate_plan would not write (its why not terminated, feasible not 0 or
   1, a figure NaN, or infinite in a feasible one). */
VS_API int vs_plan_explain(const vs_plan_estimate* est, int n, char* buf, size_t cap);
/* The same for a plan that runs, which need not be the planner's choice (a
   schedule or ZeRO stage the caller fixed): it comes first ("plan: ...", named
   as vs_plan_resolve resolves it, with its estimate from est and how far it is
   from the best, or why the planner found it infeasible, or that est does not
   hold it), then the planner's choice when that is another plan, the runners-up
   and the others. p NULL: vs_plan_explain; -1 for a plan vs_plan_resolve
   refuses. */
VS_API int vs_plan_explain_for(const vs_plan* p, const vs_plan_estimate* est, int n, char* buf, size_t cap);

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
    /* 0 (or 1): the global batch. N >= 2: only this DP rank's rows of a
       global batch split over N DP ranks (shape[0] = global rows / N: the
       rows vs_train_step would take from the global batch), as vs_data_next
       gives them; N must be the training state's DP size (VS_ERR_MISMATCH) */
    int dp_local;
} vs_batch;

/* What vs_train_step does when the gradients hold a NaN or an infinity. Every
   step measures the global gradient norm (the clip's, whether or not desc.clip
   is set: one pass over each rank's gradients and one all-reduce of one
   double), over every element of the model's gradients: DP, TP and PP, ZeRO
   shards, and every rank's copy of a replicated one. Every rank gets the same
   norm, so every rank decides alike. */
typedef enum vs_nonfinite_policy {
    /* The default, as mixed-precision trainers' skip-and-count: the optimizer
       step is skipped on every rank (parameters, optimizer state, the step
       count and with it the LR schedule stay as they were), counted
       (vs_train_skipped_steps), logged at warn, and vs_train_step returns
       VS_OK; vs_train_grad_norm says NaN or inf. */
    VS_NONFINITE_SKIP = 0,
    /* As torch's error_if_nonfinite: vs_train_step fails with
       VS_ERR_NONFINITE naming the step, the norm and the policy; parameters,
       optimizer state and both counts stay as they were, and the training
       state stays usable (the next vs_train_step starts from new gradients). */
    VS_NONFINITE_ERROR
} vs_nonfinite_policy;

/* Dynamic loss scaling for f16 (as PyTorch's GradScaler): the loss's gradient
   is seeded `scale` times larger so small f16 gradients do not flush to zero;
   the norm and the gradients are unscaled in the step's one pass over them
   (vs_clip_desc.unscale).
   - overflow (inf or NaN gradients): the step is skipped on every rank,
     counted and logged as a non-finite step (vs_train_skipped_steps, whatever
     vs_train_desc.nonfinite says: an overflow is how the scale learns it is
     too large), and the scale is multiplied by backoff
   - `interval` good steps in a row: the scale is multiplied by growth
   vs_train_loss_scale gives it; save and load keep it. */
typedef struct vs_loss_scale {
    int enable;      // 0: on when a parameter is f16; 1: on; -1: off
    double init;     // first scale (0: 65536)
    double growth;   // > 1 (0: 2)
    double backoff;  // in (0, 1) (0: 0.5)
    int interval;    // good steps before growing, >= 1 (0: 2000)
} vs_loss_scale;

typedef struct vs_train_desc {
    const vs_model_desc* model; // kept by pointer
    const vs_plan* plan;        // copied
    vs_optim_desc optim;        // AdamW by default
    vs_lr_schedule lr;          // lr 0: 1e-3 constant
    double clip;                // global grad-norm clip, finite and >= 0 (0: none)
    vs_nonfinite_policy nonfinite; // NaN or inf gradients (0: skip the step, see above)
    /* bf16/f16 parameters: 1 accumulates and all-reduces their gradients in f32
       (vs_layer_ctx.grad_dtype f32), 0 in the parameter's dtype (half the
       traffic; the optimizer steps f32 master weights either way) */
    int grad_fp32;
    vs_loss_scale loss_scale; // dynamic loss scaling (f16: on by default, see vs_loss_scale)
    /* NCCL: 0 promises every step's batch has the shape of the first (the
       activations between stages then travel without a shape header: no host
       wait per message, vs_pipe_desc.fixed_shapes; a batch of another shape is
       VS_ERR_MISMATCH naming both); 1 lets it change (one host wait per
       activation message). Ignored on threads and MPI. */
    int variable_shapes;
    /* NCCL (device buffers): the compute stream (a cudaStream_t) every layer
       callback runs on (vs_pipe_call.stream), the pipeline's copies and DDP's
       kernels too, and the TP communicator's collectives (vs_comm_set_stream),
       so TP calls in a layer are in order with its kernels. NULL: one the
       training state creates (non-blocking) and destroys. Ignored on threads
       and MPI. */
    void* stream;
    /* Gradient accumulation across calls: a step takes `accumulate` calls of
       vs_train_step (0 or 1: every call steps).
       - the calls before the last run forward and backward and add up the
         gradients without reducing them (DDP's no_sync; ZeRO-2, which keeps
         no full gradients, reduces each call into its owned f32 range)
       - the last reduces, clips and steps
       The result is one step on the calls' batches together (the loss's
       gradient is seeded 1/accumulate per call: equal within rounding); every
       call's batch has the same rows. The step count, the LR schedule and
       vs_train_save count steps, not calls; save between the calls of a step
       is VS_ERR_STATE. */
    int accumulate;
    /* Trainer-owned parameter memory (vs_ddp_param_desc.storage: DDP uses it
       in place); NULL: vescale allocates. ZeRO-2 refuses it (the gradient is
       the trainer's, full size).
       Called by vs_parallelize for each parameter this rank holds, in
       registration order, with its name, its dtype, its gradient's dtype and
       its local shard's element count. It sets *param and *grad to the
       trainer's memory for the shard and its gradient, or returns an error
       that vs_parallelize passes on. vescale writes the initial values into
       *param.

       That memory: device memory on NCCL; aligned to the element; kept until
       vs_train_free, then freed by the trainer; views into one flat buffer
       are fine. */
    vs_result (*storage)(const char* name, vs_dtype dtype, vs_dtype grad_dtype, int64_t local_numel, void** param,
                         void** grad, void* user);
    void* storage_user;
    /* vs_train_load and a checkpoint with tensors this model lacks (entries
       whose parameter, without .master / .exp_avg / .exp_avg_sq / .momentum, is
       no parameter of desc.model, nor one of the load's extra entries): 0 is
       VS_ERR_MISMATCH listing them (resuming a 3-block model from a 4-block
       checkpoint is then an error, as a parameter the checkpoint lacks is);
       1 loads what the model has and ignores them (a partial load, e.g. a
       smaller model started from a bigger one's checkpoint). */
    int load_partial;
} vs_train_desc;

typedef struct vs_train vs_train;

/* desc (NULL: all zero) as vs_parallelize resolves it, every zero-is-default
   value filled (as sokol's sg_query_desc):
   - lr: lr 0 with kind VS_LR_CONSTANT: 1e-3
   - accumulate: 0: 1 (every call steps)
   - optim: as DDP resolves it (vs_ddp_query_desc): beta1 0.9, beta2 0.999,
     eps 1e-8 with their _set flags 1, ngroups at least 1, each group's
     lr_scale 1 with lr_scale_set 1
   - loss_scale: init 65536, growth 2, backoff 0.5, interval 2000; enable 0:
     1 when desc.model has an f16 parameter, else -1
   The rest stays as given (stream NULL: one the training state makes). Checks
   clip, accumulate, nonfinite, lr, optim's numbers and loss_scale as
   vs_parallelize does (VS_ERR_INVALID naming the field); model and plan are vs_parallelize's to
   check. Passing the result to vs_parallelize gives the same training state. */
VS_API vs_result vs_train_query_desc(const vs_train_desc* desc, vs_train_desc* out);
/* Collective over the world: makes the (PP, DP, TP) mesh, allocates and
   initializes only this rank's shards (sharding-invariant init: the same values
   as one device), and wires DDP / ZeRO, the pipeline engine and TP.
   - zero 3 (ZeRO-3): a ready group a layer (a parameter goes with the first
     layer on its stage that uses it); the pipeline's unit hooks gather a
     layer's groups before each of its parts (forward, backward, W), release
     them after (reshard_after_forward 1 frees, 0 keeps until the backward),
     and mark its gradients ready after its last backward part; a recomputed
     forward keeps its groups gathered for the backward that follows. The
     DDP prefetches in the order of the first step. desc.storage is refused
     (ZeRO-3 keeps the owned shards itself).
   - dp_shard S (HSDP, 0 < S < dp): the mesh is PP x DPR x DPS x TP, DPS = S,
     DPR = dp / S; the DDP shards over DPS and replicates over DPR.
   vs_train_reconfigure moves both (an HSDP shrink by a DPR replica from
   memory; plain ZeRO-3's lost shards from a checkpoint). */
VS_API vs_result vs_parallelize(vs_world* w, const vs_train_desc* d, vs_train** out);
/* One training step on a global batch (at least one row per DP rank and
   microbatch; each input named once, a known dtype, its bytes within a
   size_t): forward, backward, gradient sync, the
   global gradient norm (and clipping with desc.clip), optimizer and
   LR-schedule step. *loss: the global mean loss, also when the gradients were
   not finite (desc.nonfinite: the step is skipped, VS_OK, or fails,
   VS_ERR_NONFINITE). Messages name the step as the batches taken before it
   (vs_train_steps + vs_train_skipped_steps). */
VS_API vs_result vs_train_step(vs_train* t, const vs_batch* batch, double* loss);
/* What a call of vs_train_step did (vs_train_step_ex). Times are host wall
   clock seconds on this rank; on GPUs the device's time shows in the phase that
   waits for it (the norm's read, in comm). */
typedef struct vs_train_stats {
    int stepped;         // 1: this call ended a step (the last of desc.accumulate calls, or every call)
    int accumulated;     // calls taken in the current step so far, this one included (1 .. accumulate)
    int skipped_step;    // the step was skipped: non-finite gradients (desc.nonfinite skip, or f16 overflow)
    double loss;         // the step's global mean loss (NaN on a call that does not step)
    double grad_norm;    // the global gradient norm before clipping (NaN on a call that does not step)
    int clipped;         // clipping scaled the gradients (desc.clip > 0 and grad_norm > desc.clip)
    double lr;           // the learning rate the step used (or would have: a skipped step; NaN: no step)
    double loss_scale;   // the loss scale the step was seeded with (1: none)
    int64_t tokens;      // tokens in this call's global batch: rows x the elements a row of batch input 0 holds
    int64_t steps;       // optimizer steps taken so far (vs_train_steps)
    int64_t skipped;     // steps skipped so far (vs_train_skipped_steps)
    double t_compute;    // forward and backward (vs_pipe_run: the schedule, its sends and receives)
    double t_comm;       // the gradient sync's end, the loss, the global norm and clipping
    double t_optim;      // the optimizer step (ZeRO: and starting the parameter all-gather)
    double t_total;      // the whole call
    size_t act_peak;     // activation memory at its peak in this call's pipeline run, bytes (vs_pipe_last_memory)
    /* ZeRO-3: the unit hooks' host time within t_compute (gathers, the waits
       for them, releases, gradients marked ready: reduce-scatters started),
       and the gathers asked for (a held or kept group's too); 0 otherwise */
    double t_gather;
    int64_t gathers;
} vs_train_stats;
/* vs_train_step, and what it did into *stats (may be NULL). With VESCALE_LOG=info
   (or a logger at info) world rank 0 logs one progress line per step:
   "step 12 | loss 2.3100 | gnorm 0.83 | lr 3.0e-04 | 41.2k tok/s | 312 ms". */
VS_API vs_result vs_train_step_ex(vs_train* t, const vs_batch* batch, vs_train_stats* stats);
/* Evaluation: the global mean loss of `batch` (as vs_train_step checks and
   splits it, and averages its loss), forward only, on any mesh and schedule
   (the training schedule's forwards: vs_pipe_sched_forward). No gradient, no
   optimizer, no hook (ZeRO-3: the gathers and releases around each layer's
   forward only): parameters, optimizer state and counts are untouched,
   also between the calls of an accumulating step. Each microbatch's
   activations go as soon as the next stage has them. Collective. On GPUs the
   batch has the training batch's shape (unless desc.variable_shapes); one host
   wait, for the loss. */
VS_API vs_result vs_train_eval(vs_train* t, const vs_batch* batch, double* loss);
/* The one step counter: optimizer steps taken. It is DDP's
   (vs_ddp_step_count(vs_train_ddp(t))), AdamW's bias correction and the LR
   schedule's position (vs_lr_at); a skipped step does not count (as DeepSpeed
   and Megatron-LM hold their LR schedule on a skipped step). Batches taken
   (the data position) = vs_train_steps + vs_train_skipped_steps. Both are saved
   and restored exactly (vs_train_save / vs_train_load). -1 for NULL, a
   negative vs_result for a freed training state. */
VS_API int64_t vs_train_steps(const vs_train* t);
/* Steps skipped for non-finite gradients (VS_NONFINITE_SKIP; a step that failed
   under VS_NONFINITE_ERROR is not counted). A negative vs_result for NULL or a
   freed training state. */
VS_API int64_t vs_train_skipped_steps(const vs_train* t);
/* The global L2 norm of the gradients the last step measured (before
   clipping): NaN or inf for a step with non-finite gradients; NaN before the
   first step, and for NULL or a freed training state (vs_last_error says). */
VS_API double vs_train_grad_norm(const vs_train* t);
/* The loss scale the next step seeds with (vs_loss_scale; 1 when scaling is
   off); NaN for NULL or a freed training state. */
VS_API double vs_train_loss_scale(const vs_train* t);
/* The training state's own mesh, pipe and DDP, for the lower-level calls
   (vs_ddp_grad_synced_owned, vs_pipe_last_timeline, ...). vs_train_free frees
   them; vs_mesh_free, vs_pipe_free and vs_ddp_free on them are VS_ERR_STATE and
   leave them working. NULL for NULL or a freed training state. */
VS_API vs_mesh* vs_train_mesh(vs_train* t);
VS_API vs_pipe* vs_train_pipe(vs_train* t);
VS_API vs_ddp* vs_train_ddp(vs_train* t);
/* Host bytes this rank allocated for parameters during vs_parallelize, at the
   peak, and the full model's bytes. */
VS_API vs_result vs_train_memory(const vs_train* t, int64_t* init_peak, int64_t* model_bytes);
/* The global value of a parameter (gathered; every rank gets it), in its dtype
   (vs_param_decl.dtype), into host memory `out` of at least its bytes (on GPUs
   staged through the device). */
VS_API vs_result vs_train_get_param(vs_train* t, const char* name, void* out, size_t bytes);

/* The whole training state into a checkpoint directory, and back, on any plan
   or mesh. Collective. It holds the parameters, the optimizer, the step and
   skipped-step counts (hence the LR schedule's position), the plan text, and
   extra blobs such as RNG and data position.
   - vs_train_save creates path's missing parent directories (as PyTorch's
     checkpoint writers do); path itself must not exist (VS_ERR_STATE: a
     checkpoint is never replaced)
   - async = 1: the state is copied and the call returns while a background
     thread writes the files; vs_train_wait (or the next save, load or
     vs_train_free), on every rank, commits the checkpoint and returns the
     result: until then it is not in place
   - vs_train_load: a parameter the checkpoint lacks, and a tensor of the
     checkpoint the model lacks (unless desc.load_partial), is an error naming
     it; a checkpoint without the skipped count (saved before it was kept)
     loads with 0
   - vs_train_load's metadata is linear in the world: rank 0 alone reads the
     index and checks it against the model; every rank returns its error in
     rank 0's words */
VS_API vs_result vs_train_save(vs_train* t, const char* path, const vs_ckpt_entry* extra, int nextra, int async);
VS_API vs_result vs_train_wait(vs_train* t);
VS_API vs_result vs_train_load(vs_train* t, const char* path, vs_ckpt_entry* extra, int nextra);
/* The plan stored in a checkpoint (to resume with the same one, or to see what
   the job ran). Not collective. */
VS_API vs_result vs_train_saved_plan(const char* path, vs_plan* out);
/* Frees the training state and everything it made (mesh, pipe, schedule, DDP,
   checkpointer). NULL: VS_OK. A training state remembers being freed: a second
   vs_train_free, or any call on a freed one, is VS_ERR_STATE ("already freed")
   while its memory is among its world's last 16 freed handles (vs_free_later);
   past that window it is freed memory (undefined). On GPUs it returns within
   the mesh's timeout even while a peer stalls: work of a collective that never
   completes has its communicators aborted before any memory is freed. */
VS_API vs_result vs_train_free(vs_train* t);
/* Elastic training (vescale_mesh.h's >>elastic): after vs_mesh_shrink gave a
   smaller mesh, or vs_world_grow and vs_mesh_init the whole one again, the
   training state moves onto it in memory, without a restart:

       vs_mesh* small = NULL;
       r = vs_mesh_shrink(vs_train_mesh(t), "DP", &small, NULL);
       if (!r && small) r = vs_train_reconfigure(&t, &desc, small, "ckpt/step_000100", NULL);

   Collective over `mesh`'s ranks.
   - *t: this rank's training state from before (it is freed, and *t is the
     new one), or NULL on a rank that has none (a replacement, a rank that
     left at a shrink: it frees its own first)
   - desc: the desc the state was made with (its plan's DP and dp_shard are
     taken from the mesh; PP, TP, zero and everything else stay)
   - mesh: the plan's PP and TP, and the dims (PP, DP, TP): plain DP, or
     (PP, DPR, DPS, TP): HSDP (shrink an HSDP state along "DPR"). With one
     replica left (DPR 1) the state becomes plain DP over DPS, as
     vs_parallelize makes that plan: on a (PP, DP, TP) mesh of the same ranks
     (vs_train_mesh), `mesh` kept beside it (it must be over the world's
     communicator, as vs_mesh_shrink's is); a grow back passes the whole
     (PP, DPR, DPS, TP) mesh again. The training state takes `mesh` over
     (vs_train_free frees it; on a failure it stays the caller's)
   - info (may be NULL): what was moved

   Where the state comes from: the ranks whose old state is current (the
   largest step count among them) hold it.
   - ZeRO-0's parameters and optimizer state (every DP rank holds all of
     it): from a DP peer of the same PP and TP coordinate; on a shrink from
     this rank's own memory (a copy), on a grow from one holder (a gather over
     DP)
   - ZeRO-1/2 shard the optimizer state (and bf16/f16 masters) over DP, and
     ZeRO-3 the parameters too; ZeRO-1/2's parameters are gathered from their
     owners' ranges as well (the rest of a rank's copy comes from the step's
     all-gather, which a failure may have cut short). The ranges a failed rank
     owned exist nowhere else. They are read from the checkpoint `ckpt` (the
     whole checkpoint is loaded, and its values kept for those ranges only:
     they are from the checkpoint's step, logged at warn with the count)
   - HSDP (any stage): the failed rank's DPR replica leaves with it, and each
     shard it owned lives on in the other replicas at the same DPS coordinate
     (the same owned ranges): the survivors go on from their own memory,
     info.lost is 0 and `ckpt` is not read. A shrink along DPS instead drops
     every copy of the shards at the failed DPS coordinate: ZeRO-1..3 take
     them from `ckpt`, as plain ZeRO does
   - with ckpt NULL, a lost range is VS_ERR_STATE naming the first one and its
     owner's state
   - on GPUs the state moves in device memory (copies and a gather over the
     DP communicator; a few host values are staged through the device)

   What goes on:
   - the step count, skipped steps and loss scale continue
   - the global batch is split over the new DP by vs_train_step (its rows must
     divide by DP x microbatches)
   - gradients of an unfinished step are dropped (the step is taken again)
   - a data loader attached to the old state (>>data) goes on with the new
     one: its rows for the new DP rank, at the position of the last step done
     (the failed step's batch is read again; read-ahead dropped); a batch DP
     does not divide is VS_ERR_INVALID before anything moves
   - a rank that comes in (t NULL) opens its loader on the new state
     (desc.train), and it starts where the others are */
typedef struct vs_reconfig_info {
    int64_t steps;       // the step count the state continues from
    int holders;         // ranks of the mesh whose old state was current
    int64_t bytes_local; // state bytes this rank copied from its own old state
    int64_t bytes_moved; // state bytes this rank received from other ranks
    int64_t lost;        // elements (whole mesh) no live rank held: taken from ckpt
    double seconds;      // the call's wall time on this rank
} vs_reconfig_info;
VS_API vs_result vs_train_reconfigure(vs_train** t, const vs_train_desc* desc, vs_mesh* mesh, const char* ckpt,
                                      vs_reconfig_info* info);

// >>data -----------------------------------------------------------------------

/* A resumable distributed data loader over token shards in the flat binary
   format plain-C GPT trainers use (llm.c's): a header of 256 little-endian
   int32 (VS_DATA_MAGIC, VS_DATA_VERSION, the token count, the rest zero), then
   the tokens as little-endian uint16. tools/vescale-shards.c writes such files
   from any text.

       vs_data* data;
       vs_data_open(&(vs_data_desc){ .files = "data/train_*.bin", .batch = B, .seq_len = T,
                                     .vocab = V, .train = t }, &data);
       for (...) { vs_batch b; vs_data_next(data, &b); vs_train_step(t, &b, &loss); }
       vs_data_free(data);

   The token stream:
   - the files matching desc.files, sorted by name (strcmp)
   - each cut into windows of T + 1 tokens that start every T tokens (window
     j of a file: its tokens [j T, j T + T], inputs the first T, targets the
     last T); a window never spans two files, and a file's last tokens that do
     not fill one are not read
   - the windows of all files in file order are numbered 0 .. N-1
   - an epoch takes them in order, or, with desc.shuffle, in an order drawn
     from (seed, epoch) by a keyed permutation of 0 .. N-1 (no table; the same
     on any mesh)
   - global batch i of an epoch is rows of that order from a cursor: B
     consecutive entries, row r of the batch = window order[w + r]; when fewer
     than B entries remain the epoch ends (the rest dropped) and the next
     starts at 0

   DP: rank d gets rows [d B/DP, (d+1) B/DP), as vs_train_step splits a global
   batch, and reads only those windows. vs_data_next's batch holds this rank's
   rows (vs_batch.dp_local = DP), which vs_train_step takes as its part of the
   global batch; losses and parameters equal those of the whole batch given on
   every rank. (Every TP and PP rank of one DP coordinate reads the same rows.)

   Position and resume. The position is (epoch, window cursor) of the next
   batch. A loader opened with desc.train is attached to that training state:
   vs_train_save stores the position with it (an entry "__data", the same on
   every rank) and vs_train_load restores it, on any mesh: the next batch
   continues the token stream exactly where the saved run stopped.
   - a load before the loader opens is kept and applied when it opens
   - the data must be the same (shard count, tokens, T, shuffle and seed: a
     difference fails the load naming both)
   - the batch size may differ (the cursor counts windows)

   Read-ahead. A thread (desc.prefetch > 0) reads the next batches into
   buffers of its own while the step runs; vs_data_next returns one that is
   ready, or waits for it at most desc.timeout seconds (VS_ERR_TIMEOUT). A
   batch stays valid until the next vs_data_next, vs_data_seek or vs_data_free
   on the loader. A read error (a file changed under it, a token >= vocab) is
   returned by the vs_data_next whose batch it was, naming the file; it stays
   until a seek. vs_data_free stops and joins the thread.

   Threads: one thread calls a loader's functions at a time (the read-ahead
   thread is internal). The loader allocates with the training state's world's
   hooks (desc.train; it keeps its own copy of them), else with malloc. It may
   outlive its training state (vs_train_free detaches it) and its world. */
#define VS_DATA_MAGIC 20240520
#define VS_DATA_VERSION 1
#define VS_DATA_HEADER_INTS 256

typedef struct vs_data vs_data;

typedef struct vs_data_desc {
    const char* files;   // a glob(3) pattern naming the shard files (required), e.g. "data/train_*.bin"
    int64_t batch;       // B: rows of the global batch (required; DP must divide it)
    int64_t seq_len;     // T: tokens a row (required); a row reads T + 1 tokens
    /* The training state the batches are for: this rank's DP coordinate and the
       DP size come from its mesh, and the loader is attached to it (its position
       saved and loaded with it; one attached loader a training state). NULL:
       dp_size and dp_rank below. */
    vs_train* train;
    int not_saved;       // with train: its DP rank only, no position in its checkpoints (a validation loader)
    int dp_size, dp_rank; // without train: this rank's part (0, 0: one rank, the whole batch)
    int shuffle;         // 1: every epoch's windows in an order drawn from (seed, epoch)
    uint64_t seed;
    int64_t vocab;       // > 0: a token >= vocab is an error naming the file and the token's place
    int prefetch;        // batches read ahead by the loader's thread (0: 2); -1: no thread (vs_data_next reads)
    double timeout;      // seconds vs_data_next waits for a batch (0: 60)
    const char* input_name;  // the batch's inputs (NULL: "tokens"), i32 [rows, T]
    const char* target_name; // its targets (NULL: "targets"), i32 [rows, T]; not input_name's
} vs_data_desc;

typedef struct vs_data_info {
    int nshards;
    int64_t tokens;            // in all the files
    int64_t windows;           // N: rows the data holds (windows of T + 1 tokens)
    int64_t batches_per_epoch; // N / B
    int64_t rows;              // this rank's rows a batch (B / DP)
    int dp_size, dp_rank;
    int64_t epoch, window;     // the position: the next batch's epoch and its first entry of the epoch's order
    int64_t batches;           // batches vs_data_next returned
    double wait_s;             // seconds vs_data_next waited for batches, in all (no thread: its reads)
    double last_wait_s;        // ... for the last batch
    double read_s;             // seconds spent reading batches (the thread's, or vs_data_next's)
} vs_data_info;

/* Opens the shards (every file's header checked: magic, version, the token
   count against the file's size; every file must hold T + 1 tokens), and with
   desc.prefetch starts the read-ahead thread. Not collective: every rank opens
   its own. Errors name the file or the pattern. */
VS_API vs_result vs_data_open(const vs_data_desc* desc, vs_data** out);
/* desc as vs_data_open resolves it, every zero-is-default value filled (as
   sokol's sg_query_desc):
   - dp_size, dp_rank: with desc.train its mesh's DP size and this rank's DP
     coordinate; without, dp_size 0: 1
   - prefetch: 0: 2 (-1 stays: no thread)
   - timeout: 0: 60 s
   - input_name: NULL: "tokens"; target_name: NULL: "targets"
   The rest stays as given. Checks the desc as vs_data_open does
   (VS_ERR_INVALID naming the field; an attached training state that has a
   loader already: VS_ERR_STATE), without opening the files. Not collective. */
VS_API vs_result vs_data_query_desc(const vs_data_desc* desc, vs_data_desc* out);
/* This rank's rows of the next global batch: out->data[0] the inputs, [1] the
   targets, i32 [B/DP, T] (loader memory, valid until the next call), and
   out->dp_local = DP. Waits at most desc.timeout. */
VS_API vs_result vs_data_next(vs_data* d, vs_batch* out);
/* Moves the position to (epoch, window), the cursor in that epoch's order
   (0 <= window < N); drops what was read ahead and any read error. */
VS_API vs_result vs_data_seek(vs_data* d, int64_t epoch, int64_t window);
VS_API vs_result vs_data_query(const vs_data* d, vs_data_info* out);
/* Where entry k (0 .. N-1) of an epoch's order is: its file (index in the
   sorted list, vs_data_file names it) and its first token within the file's
   tokens. */
VS_API vs_result vs_data_window(const vs_data* d, int64_t epoch, int64_t k, int* file, int64_t* first_token);
VS_API const char* vs_data_file(const vs_data* d, int file);
/* Stops the read-ahead thread and frees the loader (detached from its
   training state). NULL: VS_OK. The loader may outlive its training state and
   its world (it keeps its own copy of the world's allocator); a second free is
   VS_ERR_STATE while it is attached to a live training state, and undefined, as
   free's, after that. */
VS_API vs_result vs_data_free(vs_data* d);

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
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <glob.h>
#include <unistd.h>
#ifdef __cplusplus
extern "C" {
#endif
#define _VS_HL_PRIVATE static _VS_UNUSED

// >>model ----------------------------------------------------------------------

/* VS_OK for a layer's call (and parameter index i, when has_i), else the error, named. */
_VS_HL_PRIVATE vs_result _vs_hl_call(const char* fn, const vs_pipe_call* call, int has_i, int i)
{
    if (!call) return vs_set_error(VS_ERR_NULL, "%s: call is NULL", fn);
    if (!call->user) return vs_set_error(VS_ERR_NULL, "%s: not a layer's call (call->user is NULL)", fn);
    if (has_i && (i < 0 || i >= VS_LAYER_MAX_PARAMS))
        return vs_set_error(VS_ERR_INVALID, "%s: parameter %d (0..%d)", fn, i, VS_LAYER_MAX_PARAMS - 1);
    return VS_OK;
}
VS_API void* vs_layer_user(const vs_pipe_call* call)
{
    return _vs_hl_call("vs_layer_user", call, 0, 0) ? NULL : vs_layer(call)->user;
}
VS_API void* vs_layer_param(const vs_pipe_call* call, int i)
{
    // (the bounds again, where the compiler sees them)
    if (_vs_hl_call("vs_layer_param", call, 1, i) || i < 0 || i >= VS_LAYER_MAX_PARAMS) return NULL;
    return vs_layer(call)->param[i];
}
VS_API void* vs_layer_grad(const vs_pipe_call* call, int i)
{
    // (the bounds again, where the compiler sees them)
    if (_vs_hl_call("vs_layer_grad", call, 1, i) || i < 0 || i >= VS_LAYER_MAX_PARAMS) return NULL;
    return vs_layer(call)->grad[i];
}
VS_API vs_result vs_layer_param_box(const vs_pipe_call* call, int i, int64_t* local_shape, int64_t* offset)
{
    _VS_TRY(_vs_hl_call("vs_layer_param_box", call, 1, i));
    const vs_layer_ctx* c = vs_layer(call);
    for (int d = 0; d < VS_TENSOR_MAX_DIMS; d++) {
        if (local_shape) local_shape[d] = c->local_shape[i][d];
        if (offset) offset[d] = c->offset[i][d];
    }
    return VS_OK;
}
VS_API vs_mesh* vs_layer_tp(const vs_pipe_call* call)
{
    return _vs_hl_call("vs_layer_tp", call, 0, 0) ? NULL : vs_layer(call)->tp;
}

_VS_HL_PRIVATE vs_dtype _vs_hl_dt(const vs_param_decl* d) { return d->dtype ? d->dtype : VS_F32; }

/* The specs of the tensors between layers agree (vs_pipe_init's rule, checked
   without a mesh): a layer's input that an earlier layer makes admits the maker's
   spec ("h:f32[*,64]" vs "h:f32[*,32]" is an error naming both). A data input
   (no earlier layer makes it) is kept with the first spec a taker gives it:
   takers that disagree are an error, and so is a later layer that makes it (the
   pipeline would refuse that at vs_parallelize). */
_VS_HL_PRIVATE vs_result _vs_hl_model_specs(const vs_model_desc* m, const char* fn)
{
    typedef struct made {
        char name[VS_PIPE_NAME_MAX];
        _vs_pipe_spec sp;
        int layer;
        int data; // a data input: sp is the first spec a taker gave (none yet: all free)
    } made;
    size_t cap = (size_t)m->nlayers * VS_PIPE_MAX_IO * 2;
    made* t = (made*)vs_alloc(NULL, cap * sizeof *t);
    if (!t) return vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
    int nt = 0;
    vs_result r = VS_OK;
    for (int l = 0; l < m->nlayers && !r; l++)
        for (int out = 0; out < 2 && !r; out++) { // inputs first: a layer's input is an earlier layer's output
            const char* q = out ? m->layers[l].unit.outputs : m->layers[l].unit.inputs;
            for (int k = 0; q && *q && !r; k++) {
                while (*q == ' ' || *q == ',') q++;
                if (!*q) break;
                const char* e = q;
                for (int depth = 0; *e && (depth || (*e != ',' && *e != ' ')); e++) depth += *e == '[' ? 1 : *e == ']' ? -1 : 0;
                char name[VS_PIPE_NAME_MAX];
                _vs_pipe_spec sp;
                r = k < VS_PIPE_MAX_IO ? _vs_pipe_parse_spec(fn, q, (size_t)(e - q), name, &sp)
                                       : vs_set_error(VS_ERR_INVALID, "%s: layer \"%s\" has more than %d %s", fn,
                                                      m->layers[l].unit.name, VS_PIPE_MAX_IO, out ? "outputs" : "inputs");
                q = e;
                if (r) break;
                int at = -1;
                for (int i = 0; i < nt && at < 0; i++)
                    if (!strcmp(t[i].name, name)) at = i;
                if (!out && at >= 0 && !_vs_pipe_spec_agree(&t[at].sp, &sp)) {
                    char a[160], b[160];
                    r = vs_set_error(VS_ERR_MISMATCH, "%s: %s \"%s\": layer \"%s\" %s %s but layer \"%s\" takes %s", fn,
                                     t[at].data ? "data input" : "tensor", name, m->layers[t[at].layer].unit.name,
                                     t[at].data ? "takes" : "makes", _vs_pipe_spec_text(name, &t[at].sp, a, sizeof a),
                                     m->layers[l].unit.name, _vs_pipe_spec_text(name, &sp, b, sizeof b));
                } else if (!out && at >= 0 && t[at].data) { // what this taker says more: the later ones agree with it
                    _vs_pipe_spec* ds = &t[at].sp;
                    int more = (ds->dt == VS_DTYPE_INVALID && sp.dt != VS_DTYPE_INVALID) || (ds->ndim < 0 && sp.ndim >= 0);
                    if (ds->dt == VS_DTYPE_INVALID) ds->dt = sp.dt;
                    if (ds->ndim < 0 && sp.ndim >= 0) ds->ndim = sp.ndim, memcpy(ds->dim, sp.dim, sizeof ds->dim);
                    for (int d = 0; d < ds->ndim && d < sp.ndim; d++)
                        if (ds->dim[d] < 0 && sp.dim[d] >= 0) ds->dim[d] = sp.dim[d], more = 1;
                    if (more) t[at].layer = l;
                } else if (out && at >= 0 && t[at].data) {
                    r = vs_set_error(VS_ERR_INVALID, "%s: layer \"%s\" makes \"%s\", which layer \"%s\" before it takes as "
                                     "a data input (a layer's inputs come from earlier layers or the batch)", fn,
                                     m->layers[l].unit.name, name, m->layers[t[at].layer].unit.name);
                }
                if (at < 0 && (size_t)nt < cap) { // an output, or a data input's first taker
                    memcpy(t[nt].name, name, sizeof name);
                    t[nt].sp = sp, t[nt].layer = l, t[nt].data = !out, nt++;
                }
            }
        }
    vs_free(NULL, t);
    return r;
}

/* Megatron pairs line up: a row-parallel weight's rows (its input, split over TP)
   are the columns of a column-parallel weight since the last row-parallel one
   (the activation between them is split by those columns). A row-parallel weight
   with no column-parallel one before it is not checked. */
_VS_HL_PRIVATE vs_result _vs_hl_model_pairs(const vs_model_desc* m, const char* fn)
{
    int64_t cols[32];
    const char* cname[32];
    int nc = 0;
    for (int l = 0; l < m->nlayers; l++)
        for (int i = 0; i < m->layers[l].nparams; i++) {
            const vs_param_decl* p = &m->layers[l].params[i];
            if (p->ndim < 2 || (p->role != VS_ROLE_COLUMN && p->role != VS_ROLE_ROW)) continue;
            if (p->role == VS_ROLE_COLUMN) {
                if (nc == 32) memmove(cols, cols + 1, 31 * sizeof cols[0]), memmove(cname, cname + 1, 31 * sizeof cname[0]), nc--;
                cols[nc] = p->shape[1], cname[nc++] = p->name;
                continue;
            }
            int ok = nc == 0;
            for (int c = 0; c < nc && !ok; c++) ok = cols[c] == p->shape[0];
            if (!ok)
                return vs_set_error(VS_ERR_INVALID, "%s: the row-parallel weight \"%s\" has %lld rows, but the "
                                    "column-parallel weight before it, \"%s\", has %lld columns (weights are [in, out]: "
                                    "the rows of the one are the columns of the other)", fn, p->name,
                                    (long long)p->shape[0], cname[nc - 1], (long long)cols[nc - 1]);
            nc = 0;
        }
    return VS_OK;
}

VS_API vs_result vs_model_check(const vs_model_desc* m)
{
    const char* fn = "vs_model_check";
    if (!m || !m->layers) return vs_set_error(VS_ERR_NULL, "%s: %s is NULL", fn, m ? "layers" : "model");
    if (m->nlayers < 1) return vs_set_error(VS_ERR_INVALID, "%s: %d layers", fn, m->nlayers);
    int64_t total = 0; // bytes of the model's parameters (a tied one once): they must fit an int64
    for (int l = 0; l < m->nlayers; l++) {
        const vs_layer_decl* L = &m->layers[l];
        const char* ln = L->unit.name ? L->unit.name : "(no name)";
        if (!L->unit.name || !L->unit.name[0]) return vs_set_error(VS_ERR_INVALID, "%s: layer %d has no name", fn, l);
        if (!L->unit.forward) return vs_set_error(VS_ERR_NULL, "%s: layer \"%s\" has no forward", fn, ln);
        if (L->sp_ok != 0 && L->sp_ok != 1)
            return vs_set_error(VS_ERR_INVALID, "%s: layer \"%s\": sp_ok = %d (0 or 1)", fn, ln, L->sp_ok);
        if (L->nparams < 0 || L->nparams > VS_LAYER_MAX_PARAMS)
            return vs_set_error(VS_ERR_INVALID, "%s: layer \"%s\": %d parameters (0..%d)", fn, ln, L->nparams,
                                VS_LAYER_MAX_PARAMS);
        for (int i = 0; i < L->nparams; i++) {
            const vs_param_decl* p = &L->params[i];
            if (!p->name || !p->name[0] || strlen(p->name) >= VS_CKPT_NAME_MAX - 32)
                return vs_set_error(VS_ERR_INVALID, "%s: layer \"%s\": parameter %d has no name or one too long", fn,
                                    ln, i);
            if (_vs_hl_dt(p) != VS_F32 && _vs_hl_dt(p) != VS_BF16 && _vs_hl_dt(p) != VS_F16)
                return vs_set_error(VS_ERR_UNSUPPORTED, "%s: parameter \"%s\": dtype %s (f32, bf16 or f16)", fn,
                                    p->name, vs_dtype_name(p->dtype));
            if (p->ndim < 1 || p->ndim > VS_TENSOR_MAX_DIMS)
                return vs_set_error(VS_ERR_INVALID, "%s: parameter \"%s\": ndim %d", fn, p->name, p->ndim);
            int64_t numel = 1; // f32 bytes of it must fit an int64 (numel <= 2^61 - 1)
            for (int d = 0; d < p->ndim; d++) {
                if (p->shape[d] < 1)
                    return vs_set_error(VS_ERR_INVALID, "%s: parameter \"%s\": shape[%d] = %lld", fn, p->name, d,
                                        (long long)p->shape[d]);
                if (numel > (INT64_MAX / 4) / p->shape[d]) {
                    char sh[160];
                    size_t k = 0;
                    for (int e = 0; e < p->ndim && k < sizeof sh; e++)
                        k += (size_t)snprintf(sh + k, sizeof sh - k, "%s%lld", e ? "," : "", (long long)p->shape[e]);
                    return vs_set_error(VS_ERR_INVALID,
                                        "%s: parameter \"%s\": shape [%s] has more elements than an int64 counts in "
                                        "bytes (2^61)",
                                        fn, p->name, sh);
                }
                numel *= p->shape[d];
            }
            if ((int)p->role < 0 || p->role > VS_ROLE_HEAD)
                return vs_set_error(VS_ERR_INVALID, "%s: parameter \"%s\": role %d", fn, p->name, (int)p->role);
            if (p->shard_unit < 0)
                return vs_set_error(VS_ERR_INVALID, "%s: parameter \"%s\": shard_unit %lld (0: any split)", fn, p->name,
                                    (long long)p->shard_unit);
            int tied = 0;
            for (int l2 = 0; l2 <= l; l2++) // the same name again: a tied parameter, so the same tensor
                for (int j = 0; j < (l2 == l ? i : m->layers[l2].nparams); j++) {
                    const vs_param_decl* q = &m->layers[l2].params[j];
                    if (strcmp(q->name, p->name)) continue;
                    tied = 1;
                    int same = q->ndim == p->ndim && _vs_hl_dt(q) == _vs_hl_dt(p);
                    for (int d = 0; same && d < p->ndim; d++) same = q->shape[d] == p->shape[d];
                    if (!same || l2 == l)
                        return vs_set_error(VS_ERR_INVALID,
                                            "%s: parameter \"%s\" is declared by layers \"%s\" and \"%s\" %s", fn,
                                            p->name, m->layers[l2].unit.name, ln,
                                            l2 == l ? "twice" : "with different shapes or dtypes");
                }
            if (!tied && total > INT64_MAX - numel * 4)
                return vs_set_error(VS_ERR_INVALID,
                                    "%s: the parameters up to \"%s\" add up to more than 2^63 - 1 bytes", fn, p->name);
            if (!tied) total += numel * 4;
        }
    }
    _VS_TRY(_vs_hl_model_pairs(m, fn));
    return _vs_hl_model_specs(m, fn);
}

// >>plan -----------------------------------------------------------------------

/* Glob: * any run, ? one character, [abc] / [a-z] a set. */
_VS_HL_PRIVATE int _vs_glob(const char* p, const char* s)
{
    for (; *p; p++, s++) {
        if (*p == '*') {
            while (p[1] == '*') p++;
            for (const char* t = s;; t++) {
                if (_vs_glob(p + 1, t)) return 1;
                if (!*t) return 0;
            }
        }
        if (!*s) return 0;
        if (*p == '?') continue;
        if (*p == '[') {
            const char* q = p + 1;
            int hit = 0;
            while (*q && *q != ']') {
                if (q[1] == '-' && q[2] && q[2] != ']') {
                    hit |= *s >= q[0] && *s <= q[2];
                    q += 3;
                } else hit |= *q++ == *s;
            }
            if (!*q) return *p == *s; // no closing bracket: a literal [
            if (!hit) return 0;
            p = q;
            continue;
        }
        if (*p != *s) return 0;
    }
    return !*s;
}

_VS_HL_PRIVATE vs_result _vs_hl_placement_text(const char* t, vs_placement* out)
{
    if (!strcmp(t, "Replicate") || !strcmp(t, "R")) {
        *out = vs_replicate();
        return VS_OK;
    }
    int d = -1;
    char c1 = 0, c2 = 0;
    if (sscanf(t, "Shard(%d%c%c", &d, &c1, &c2) != 2 || c1 != ')' || d < 0 || d >= VS_TENSOR_MAX_DIMS)
        return vs_set_error(VS_ERR_INVALID, "placement \"%s\" (Replicate or Shard(d))", t);
    *out = vs_shard(d);
    return VS_OK;
}

_VS_HL_PRIVATE int _vs_hl_sz(int v) { return v > 0 ? v : 1; }
#define _VS_HL_MAX_PREFETCH 1024
/* A plan's ZeRO-3 settings as they resolve (0 and not _set: 1). */
_VS_HL_PRIVATE int _vs_hl_reshard(const vs_plan* p)
{
    return p->reshard_after_forward || p->reshard_after_forward_set ? p->reshard_after_forward : 1;
}
_VS_HL_PRIVATE int _vs_hl_prefetch(const vs_plan* p) { return p->prefetch || p->prefetch_set ? p->prefetch : 1; }
/* HSDP's shard group size, 0 without HSDP (dp_shard 0 or dp: one replica). */
_VS_HL_PRIVATE int _vs_hl_shard(const vs_plan* p) { return p->dp_shard > 0 && p->dp_shard < _vs_hl_sz(p->dp) ? p->dp_shard : 0; }
_VS_HL_PRIVATE vs_pipe_kind _vs_hl_sched(const vs_plan* p) { return p->schedule ? p->schedule : VS_PIPE_1F1B; }
_VS_HL_PRIVATE int _vs_hl_chunks(const vs_plan* p)
{
    return p->chunks > 0 ? p->chunks : _vs_pipe_kind_own_chunks(_vs_hl_sched(p));
}
_VS_HL_PRIVATE int _vs_hl_mbs(const vs_plan* p) { return p->microbatches > 0 ? p->microbatches : _vs_hl_sz(p->pp); }
_VS_HL_PRIVATE vs_pipe_split_kind _vs_hl_split(const vs_plan* p)
{
    if (p->split) return p->split;
    return p->split_points[0] ? VS_PIPE_SPLIT_MANUAL : VS_PIPE_SPLIT_FLOPS;
}

/* What is wrong with a plan's string s (an array of cap bytes), or NULL: it must
   end within its array and hold UTF-8 without quotes, backslashes or control
   characters, so the text and JSON forms carry it as it is and parse it back
   (JSON output is valid UTF-8). *at: the offending byte. */
_VS_HL_PRIVATE const char* _vs_hl_text_bad(const char* s, size_t cap, size_t* at)
{
    const unsigned char* u = (const unsigned char*)s;
    const unsigned char* z = (const unsigned char*)memchr(s, 0, cap);
    if (!z) return *at = cap, "is not terminated within its array";
    for (size_t i = 0; u + i < z;) {
        unsigned c = u[i];
        *at = i;
        if (c == '"' || c == '\\') return "holds a quote or a backslash";
        if (c < 32) return "holds a control character";
        if (c < 0x80) {
            i++;
            continue;
        }
        // UTF-8: the shortest form of a scalar value (no surrogates, at most U+10FFFF)
        int n = c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2 : c >= 0xf0 && c <= 0xf4 ? 3 : -1;
        if (n < 0) return "is not UTF-8";
        unsigned lo = 0x80, hi = 0xbf;
        if (c == 0xe0) lo = 0xa0;
        if (c == 0xed) hi = 0x9f;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;
        for (int k = 1; k <= n; k++) {
            unsigned d = u + i + k < z ? u[i + k] : 0;
            if (d < (k == 1 ? lo : 0x80) || d > (k == 1 ? hi : 0xbf)) return "is not UTF-8";
        }
        i += (size_t)n + 1;
    }
    return NULL;
}

/* The plan's own fields, without a model: what vs_plan_print and vs_plan_check
   accept (each out-of-range value named; nothing coerced to a default). */
_VS_HL_PRIVATE vs_result _vs_plan_fields(const vs_plan* p, const char* fn)
{
    if (p->pp < 0 || p->dp < 0 || p->tp < 0)
        return vs_set_error(VS_ERR_INVALID, "%s: mesh PP=%d DP=%d TP=%d (each >= 0; 0: 1)", fn, p->pp, p->dp, p->tp);
    if (p->pp > VS_PIPE_MAX_CHUNKS) // (and so the default microbatch count, pp, fits what parse takes)
        return vs_set_error(VS_ERR_INVALID, "%s: mesh PP=%d: at most VS_PIPE_MAX_CHUNKS (%d) stages", fn, p->pp,
                            VS_PIPE_MAX_CHUNKS);
    int64_t ranks = (int64_t)_vs_hl_sz(p->pp) * _vs_hl_sz(p->dp) * _vs_hl_sz(p->tp);
    if (ranks > INT_MAX)
        return vs_set_error(VS_ERR_INVALID, "%s: mesh PP=%d DP=%d TP=%d is %lld ranks, more than an int counts", fn,
                            p->pp, p->dp, p->tp, (long long)ranks);
    if ((int)p->policy < 0 || p->policy > VS_TP_NONE)
        return vs_set_error(VS_ERR_INVALID, "%s: policy %d (VS_TP_MEGATRON or VS_TP_NONE)", fn, (int)p->policy);
    if (p->strict != 0 && p->strict != 1) return vs_set_error(VS_ERR_INVALID, "%s: strict %d (0 or 1)", fn, p->strict);
    if (p->nrules < 0 || p->nrules > VS_PLAN_MAX_RULES)
        return vs_set_error(VS_ERR_INVALID, "%s: %d rules (0..%d)", fn, p->nrules, VS_PLAN_MAX_RULES);
    if ((int)p->split < 0 || p->split > VS_PIPE_SPLIT_TIME)
        return vs_set_error(VS_ERR_INVALID, "%s: split %d is not a vs_pipe_split_kind", fn, (int)p->split);
    if (p->chunks < 0) return vs_set_error(VS_ERR_INVALID, "%s: chunks %d (>= 0; 0: the schedule's)", fn, p->chunks);
    if (p->microbatches < 0 || p->microbatches > VS_PIPE_MAX_MBS)
        return vs_set_error(VS_ERR_INVALID, "%s: microbatches %d (0..%d; 0: pp)", fn, p->microbatches, VS_PIPE_MAX_MBS);
    if ((int)p->schedule < 0 || (int)p->schedule >= VS_PIPE_KIND_COUNT)
        return vs_set_error(VS_ERR_INVALID, "%s: schedule %d is not a vs_pipe_kind", fn, (int)p->schedule);
    if ((int)p->zero < 0 || p->zero > VS_ZERO_3) return vs_set_error(VS_ERR_INVALID, "%s: zero %d (0..3)", fn, (int)p->zero);
    if (p->dp_shard < 0 || (p->dp_shard > 0 && _vs_hl_sz(p->dp) % p->dp_shard))
        return vs_set_error(VS_ERR_INVALID, "%s: dp_shard %d does not divide DP=%d (HSDP: the shard group's size, a divisor "
                            "of dp; 0: no HSDP)", fn, p->dp_shard, _vs_hl_sz(p->dp));
    if (p->reshard_after_forward < 0 || p->reshard_after_forward > 1)
        return vs_set_error(VS_ERR_INVALID, "%s: reshard_after_forward %d (0 or 1)", fn, p->reshard_after_forward);
    if (p->prefetch < 0 || p->prefetch > _VS_HL_MAX_PREFETCH)
        return vs_set_error(VS_ERR_INVALID, "%s: prefetch %d (0..%d groups ahead)", fn, p->prefetch, _VS_HL_MAX_PREFETCH);
    if ((p->reshard_after_forward_set | p->prefetch_set) & ~1)
        return vs_set_error(VS_ERR_INVALID, "%s: reshard_after_forward_set %d, prefetch_set %d (0 or 1)", fn,
                            p->reshard_after_forward_set, p->prefetch_set);
    if (p->sequence_parallel < 0 || p->sequence_parallel > 1)
        return vs_set_error(VS_ERR_INVALID, "%s: sequence_parallel %d (0 or 1)", fn, p->sequence_parallel);
    size_t at = 0;
    const char* bad;
    for (int i = 0; i < p->nrules; i++) {
        const vs_shard_rule* r = &p->rules[i];
        if ((bad = _vs_hl_text_bad(r->pattern, sizeof r->pattern, &at)) != NULL)
            return vs_set_error(VS_ERR_INVALID, "%s: rule %d: its pattern %s (byte %zu of \"%.*s\")", fn, i, bad, at,
                                (int)(at < 40 ? at : 40), r->pattern);
        if (!r->pattern[0]) return vs_set_error(VS_ERR_INVALID, "%s: rule %d: its pattern is empty", fn, i);
        if ((bad = _vs_hl_text_bad(r->placement, sizeof r->placement, &at)) != NULL)
            return vs_set_error(VS_ERR_INVALID, "%s: rule %d (\"%s\"): its placement %s (byte %zu)", fn, i, r->pattern,
                                bad, at);
        if (strchr(r->pattern, ' '))
            return vs_set_error(VS_ERR_INVALID, "%s: rule %d: its pattern \"%s\" holds a space", fn, i, r->pattern);
    }
    if ((bad = _vs_hl_text_bad(p->split_points, sizeof p->split_points, &at)) != NULL)
        return vs_set_error(VS_ERR_INVALID, "%s: split_points %s (byte %zu)", fn, bad, at);
    if ((bad = _vs_hl_text_bad(p->recompute, sizeof p->recompute, &at)) != NULL)
        return vs_set_error(VS_ERR_INVALID, "%s: recompute %s (byte %zu)", fn, bad, at);
    return VS_OK;
}

/* The next blank-separated pattern of a plan's recompute list at *c into pat
   (256 bytes); 0 when none is left. */
_VS_HL_PRIVATE int _vs_hl_next_pat(const char** c, char* pat)
{
    while (**c == ' ') ++*c;
    size_t n = strcspn(*c, " ");
    if (!n) return 0;
    snprintf(pat, 256, "%.*s", (int)n, *c);
    *c += n;
    return 1;
}

/* 1: layer `name` recomputes under plan p (a pattern of p->recompute matches it). */
_VS_HL_PRIVATE int _vs_hl_recomputes(const vs_plan* p, const char* name)
{
    char pat[256];
    for (const char* c = p->recompute; name && _vs_hl_next_pat(&c, pat);)
        if (_vs_glob(pat, name)) return 1;
    return 0;
}

VS_API vs_result vs_plan_placement(const vs_plan* p, const vs_param_decl* d, vs_placement* out, const char** why)
{
    const char* fn = "vs_plan_placement";
    if (!p || !d || !out) return vs_set_error(VS_ERR_NULL, "%s: %s is NULL", fn, !p ? "plan" : !d ? "decl" : "out");
    _VS_TRY(_vs_plan_fields(p, fn));
    if (!d->name) return vs_set_error(VS_ERR_NULL, "%s: the parameter's name is NULL", fn);
    if ((int)d->role < 0 || d->role > VS_ROLE_HEAD)
        return vs_set_error(VS_ERR_INVALID, "%s: parameter \"%s\": role %d is not a vs_role", fn, d->name, (int)d->role);
    static const char* const roles[] = {"other: replicated", "embedding: vocab-parallel", "column-parallel",
                                        "row-parallel", "norm: replicated", "head: vocab-parallel"};
    for (int i = 0; i < p->nrules; i++)
        if (_vs_glob(p->rules[i].pattern, d->name)) {
            if (why) *why = p->rules[i].pattern;
            vs_result r = _vs_hl_placement_text(p->rules[i].placement, out);
            if (r) return vs_set_error(r, "vs_plan_placement: rule \"%s\": %s", p->rules[i].pattern, vs_last_error());
            if (out->kind == VS_PLACE_SHARD && out->dim >= d->ndim)
                return vs_set_error(VS_ERR_INVALID, "vs_plan_placement: rule \"%s\" shards dim %d of \"%s\" (%d dims)",
                                    p->rules[i].pattern, out->dim, d->name, d->ndim);
            return VS_OK;
        }
    *out = vs_replicate();
    if (why) *why = p->policy == VS_TP_NONE ? "policy none: replicated" : roles[d->role];
    if (p->policy == VS_TP_NONE) return VS_OK;
    switch (d->role) {
    case VS_ROLE_EMBEDDING: *out = vs_shard(0); break;
    case VS_ROLE_COLUMN: *out = vs_shard(d->ndim >= 2 ? 1 : 0); break;
    case VS_ROLE_ROW:
        if (d->ndim >= 2) *out = vs_shard(0);
        break;
    case VS_ROLE_HEAD: *out = vs_shard(d->ndim >= 2 ? 1 : 0); break;
    default: break;
    }
    return VS_OK;
}


/* Sequence parallelism needs every layer to handle it (vs_layer_decl.sp_ok). */
_VS_HL_PRIVATE vs_result _vs_hl_sp_layers(const vs_model_desc* m, int sp, const char* fn)
{
    for (int l = 0; sp && l < m->nlayers; l++)
        if (!m->layers[l].sp_ok)
            return vs_set_error(VS_ERR_INVALID,
                                "%s: sequence_parallel, but layer \"%s\" does not declare that it handles it "
                                "(vs_layer_decl.sp_ok = 0: it would compute on its rank's part of the sequence as if "
                                "it were the whole)",
                                fn, m->layers[l].unit.name);
    return VS_OK;
}

VS_API vs_result vs_plan_check(const vs_plan* p, const vs_model_desc* m)
{
    const char* fn = "vs_plan_check";
    if (!p) return vs_set_error(VS_ERR_NULL, "%s: plan is NULL", fn);
    _VS_TRY(vs_model_check(m));
    _VS_TRY(_vs_plan_fields(p, fn));
    const int pp = _vs_hl_sz(p->pp), tp = _vs_hl_sz(p->tp), V = _vs_hl_chunks(p);
    if (p->sequence_parallel && tp > 1 && p->policy == VS_TP_NONE)
        return vs_set_error(VS_ERR_INVALID, "%s: sequence_parallel with policy none: TP=%d splits nothing to gather around",
                            fn, tp);
    if ((int64_t)pp * V > m->nlayers)
        return vs_set_error(VS_ERR_INVALID, "%s: %d stages x %d chunks but the model has %d layers", fn, pp, V,
                            m->nlayers);
    for (int i = 0; i < p->nrules; i++) {
        vs_placement pl;
        vs_result r = _vs_hl_placement_text(p->rules[i].placement, &pl);
        if (r) return vs_set_error(r, "%s: rule \"%s\": %s", fn, p->rules[i].pattern, vs_last_error());
        if (!p->strict) continue;
        int hits = 0;
        for (int l = 0; l < m->nlayers && !hits; l++)
            for (int j = 0; j < m->layers[l].nparams && !hits; j++) hits = _vs_glob(p->rules[i].pattern, m->layers[l].params[j].name);
        if (!hits)
            return vs_set_error(VS_ERR_INVALID, "%s: strict: rule \"%s\" matches no parameter", fn, p->rules[i].pattern);
    }
    char pat[256];
    for (const char* c = p->recompute; _vs_hl_next_pat(&c, pat);) { // every recompute pattern names a layer
        int hits = 0;
        for (int l = 0; l < m->nlayers && !hits; l++) hits = m->layers[l].unit.name && _vs_glob(pat, m->layers[l].unit.name);
        if (!hits) return vs_set_error(VS_ERR_INVALID, "%s: recompute \"%s\" matches no layer", fn, pat);
    }
    for (int l = 0; l < m->nlayers; l++)
        for (int j = 0; j < m->layers[l].nparams; j++) {
            const vs_param_decl* d = &m->layers[l].params[j];
            vs_placement pl;
            const char* why;
            _VS_TRY(vs_plan_placement(p, d, &pl, &why));
            if (pl.kind == VS_PLACE_SHARD && d->shape[pl.dim] % tp)
                return vs_set_error(VS_ERR_INVALID,
                                    "%s: TP=%d does not divide dim %d of \"%s\" (%lld; %s): the heads or the hidden "
                                    "units would split unevenly",
                                    fn, tp, pl.dim, d->name, (long long)d->shape[pl.dim], why);
            if (pl.kind == VS_PLACE_SHARD && d->shard_unit > 1 && (d->shape[pl.dim] / tp) % d->shard_unit)
                return vs_set_error(VS_ERR_INVALID,
                                    "%s: TP=%d cuts dim %d of \"%s\" (%lld) into %lld, not whole blocks of %lld "
                                    "(shard_unit: a head's width; TP must divide the %lld heads)",
                                    fn, tp, pl.dim, d->name, (long long)d->shape[pl.dim], (long long)(d->shape[pl.dim] / tp),
                                    (long long)d->shard_unit, (long long)(d->shape[pl.dim] / d->shard_unit));
        }
    return _vs_hl_sp_layers(m, p->sequence_parallel, fn);
}

static const char* const _vs_hl_split_names[] = {"default", "manual", "uniform", "parameters", "flops", "time"};
/* The split a plan prints as: what its default resolves to ("default" parses,
   and is never printed: it read as if the library had no split of its own). */
_VS_HL_PRIVATE const char* _vs_hl_split_name(const vs_plan* p)
{
    vs_pipe_split_kind k = _vs_hl_split(p);
    return _vs_hl_split_names[(int)k >= 0 && k <= VS_PIPE_SPLIT_TIME ? k : 0];
}

/* The print functions' arguments: -1 (error set) when they cannot print. */
_VS_HL_PRIVATE int _vs_plan_printable(const vs_plan* p, const char* buf, size_t cap, const char* fn)
{
    if (!p) return vs_set_error(VS_ERR_NULL, "%s: plan is NULL", fn), -1;
    if (!buf && cap) return vs_set_error(VS_ERR_NULL, "%s: buf is NULL with cap %zu (NULL only with cap 0)", fn, cap), -1;
    return _vs_plan_fields(p, fn) ? -1 : 0;
}

VS_API int vs_plan_print(const vs_plan* p, char* buf, size_t cap)
{
    size_t len = 0;
    if (buf && cap) buf[0] = 0;
    if (_vs_plan_printable(p, buf, cap, "vs_plan_print")) return -1;
    _vs_pipe_cat(buf, cap, &len, "mesh: PP=%d DP=%d TP=%d\n", _vs_hl_sz(p->pp), _vs_hl_sz(p->dp), _vs_hl_sz(p->tp));
    _vs_pipe_cat(buf, cap, &len, "policy: %s\nstrict: %d\n", p->policy == VS_TP_NONE ? "none" : "megatron", p->strict);
    for (int i = 0; i < p->nrules; i++)
        _vs_pipe_cat(buf, cap, &len, "shard: %s %s\n", p->rules[i].pattern, p->rules[i].placement);
    _vs_pipe_cat(buf, cap, &len, "split: %s\n", _vs_hl_split_name(p));
    if (p->split_points[0]) _vs_pipe_cat(buf, cap, &len, "split_points: %s\n", p->split_points);
    _vs_pipe_cat(buf, cap, &len, "chunks: %d\nschedule: %s\nmicrobatches: %d\nzero: %d\n", _vs_hl_chunks(p),
                 vs_pipe_kind_name(_vs_hl_sched(p)), _vs_hl_mbs(p), (int)p->zero);
    if (p->sequence_parallel) _vs_pipe_cat(buf, cap, &len, "sequence_parallel: %d\n", p->sequence_parallel);
    if (p->recompute[0]) _vs_pipe_cat(buf, cap, &len, "recompute: %s\n", p->recompute);
    if (p->dp_shard) _vs_pipe_cat(buf, cap, &len, "dp_shard: %d\n", p->dp_shard);
    if (p->reshard_after_forward || p->reshard_after_forward_set)
        _vs_pipe_cat(buf, cap, &len, "reshard_after_forward: %d\n", p->reshard_after_forward);
    if (p->prefetch || p->prefetch_set) _vs_pipe_cat(buf, cap, &len, "prefetch: %d\n", p->prefetch);
    return len > (size_t)INT_MAX ? INT_MAX : (int)len;
}

/* A JSON string's contents as they are: the plan's strings are UTF-8 without
   quotes, backslashes or control characters (_vs_plan_fields), so the output is
   valid JSON in valid UTF-8. */
VS_API int vs_plan_print_json(const vs_plan* p, char* buf, size_t cap)
{
    size_t len = 0;
    if (buf && cap) buf[0] = 0;
    if (_vs_plan_printable(p, buf, cap, "vs_plan_print_json")) return -1;
    _vs_pipe_cat(buf, cap, &len, "{\"mesh\": {\"pp\": %d, \"dp\": %d, \"tp\": %d}, \"policy\": \"%s\", \"strict\": %d, \"rules\": [",
                 _vs_hl_sz(p->pp), _vs_hl_sz(p->dp), _vs_hl_sz(p->tp), p->policy == VS_TP_NONE ? "none" : "megatron",
                 p->strict);
    for (int i = 0; i < p->nrules; i++)
        _vs_pipe_cat(buf, cap, &len, "%s{\"pattern\": \"%s\", \"placement\": \"%s\"}", i ? ", " : "", p->rules[i].pattern,
                     p->rules[i].placement);
    _vs_pipe_cat(buf, cap, &len,
                 "], \"split\": \"%s\", \"split_points\": \"%s\", \"chunks\": %d, \"schedule\": \"%s\", "
                 "\"microbatches\": %d, \"zero\": %d, \"sequence_parallel\": %d%s%s%s",
                 _vs_hl_split_name(p), p->split_points,
                 _vs_hl_chunks(p), vs_pipe_kind_name(_vs_hl_sched(p)), _vs_hl_mbs(p), (int)p->zero, p->sequence_parallel,
                 p->recompute[0] ? ", \"recompute\": \"" : "", p->recompute, p->recompute[0] ? "\"" : "");
    if (p->dp_shard) _vs_pipe_cat(buf, cap, &len, ", \"dp_shard\": %d", p->dp_shard);
    if (p->reshard_after_forward || p->reshard_after_forward_set)
        _vs_pipe_cat(buf, cap, &len, ", \"reshard_after_forward\": %d", p->reshard_after_forward);
    if (p->prefetch || p->prefetch_set) _vs_pipe_cat(buf, cap, &len, ", \"prefetch\": %d", p->prefetch);
    _vs_pipe_cat(buf, cap, &len, "}\n");
    return len > (size_t)INT_MAX ? INT_MAX : (int)len;
}

/* The keys of a plan's text; each once (shard, a rule, any number of times). */
static const char* const _vs_plan_keys[] = {"mesh",   "policy",       "strict", "split", "split_points",
                                            "chunks", "schedule",     "microbatches", "zero",
                                            "sequence_parallel", "shard", "recompute",
                                            "dp_shard", "reshard_after_forward", "prefetch"};
#define _VS_PLAN_NKEYS ((int)(sizeof _vs_plan_keys / sizeof _vs_plan_keys[0]))

/* A decimal int in [lo, hi] that is the whole of v. */
_VS_HL_PRIVATE int _vs_plan_int(const char* v, long lo, long hi, int* out)
{
    char* end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi || (*v != '-' && (*v < '0' || *v > '9'))) return 0;
    *out = (int)x;
    return 1;
}

/* One rule: a pattern (no blanks) and a placement. */
_VS_HL_PRIVATE vs_result _vs_plan_rule(vs_plan* p, const char* pat, size_t pn, const char* place, const char* where)
{
    const char* fn = "vs_plan_parse";
    if (p->nrules == VS_PLAN_MAX_RULES)
        return vs_set_error(VS_ERR_INVALID, "%s: %s: more than %d rules", fn, where, VS_PLAN_MAX_RULES);
    vs_shard_rule* r = &p->rules[p->nrules];
    vs_placement pl;
    if (!pn || pn >= sizeof r->pattern || memchr(pat, ' ', pn) || memchr(pat, '\t', pn))
        return vs_set_error(VS_ERR_INVALID, "%s: %s: rule pattern \"%.*s\" (1 to %zu bytes, no blanks)", fn, where,
                            (int)(pn < 60 ? pn : 60), pat, sizeof r->pattern - 1);
    if (strlen(place) >= sizeof r->placement || _vs_hl_placement_text(place, &pl))
        return vs_set_error(VS_ERR_INVALID, "%s: %s: rule \"%.*s\": placement \"%.40s\" (Replicate or Shard(d))", fn, where,
                            (int)pn, pat, place);
    memcpy(r->pattern, pat, pn);
    r->pattern[pn] = 0;
    snprintf(r->placement, sizeof r->placement, "%s", place);
    p->nrules++;
    return VS_OK;
}

/* One "key: value" of the plan (both forms end up here): the value without its
   leading and trailing blanks (as the text form writes it), each key once. */
_VS_HL_PRIVATE vs_result _vs_plan_set(vs_plan* p, const char* key, const char* value, const char* where, unsigned* seen)
{
    const char* fn = "vs_plan_parse";
    char v[256];
    while (*value == ' ' || *value == '\t') value++;
    size_t n = strlen(value);
    while (n && (value[n - 1] == ' ' || value[n - 1] == '\t')) n--;
    if (n > 200) return vs_set_error(VS_ERR_INVALID, "%s: %s: value of %s too long", fn, where, key);
    memcpy(v, value, n);
    v[n] = 0;
    size_t at = 0;
    const char* bad = _vs_hl_text_bad(v, n + 1, &at);
    if (bad) return vs_set_error(VS_ERR_INVALID, "%s: %s: the value of %s %s (byte %zu)", fn, where, key, bad, at);
    int k = 0, x = 0;
    while (k < _VS_PLAN_NKEYS && strcmp(key, _vs_plan_keys[k])) k++;
    if (k == _VS_PLAN_NKEYS) { // name the keys: a newcomer writes "dp: 4" or "dp_shards: 2"
        char keys[256];
        size_t kn = 0;
        for (int j = 0; j < _VS_PLAN_NKEYS && kn < sizeof keys; j++)
            kn += (size_t)snprintf(keys + kn, sizeof keys - kn, "%s%s", j ? ", " : "", _vs_plan_keys[j]);
        int size = !strcmp(key, "pp") || !strcmp(key, "dp") || !strcmp(key, "tp");
        return vs_set_error(VS_ERR_INVALID, "%s: %s: unknown key \"%s\"%s (the keys: %s)", fn, where, key,
                            size ? "; the sizes are one key, text \"mesh: PP=1 DP=4 TP=1\", JSON "
                                   "\"mesh\": {\"pp\": 1, \"dp\": 4, \"tp\": 1}" : "", keys);
    }
    if (strcmp(key, "shard")) {
        if (*seen & (1u << k)) return vs_set_error(VS_ERR_INVALID, "%s: %s: key \"%s\" twice", fn, where, key);
        *seen |= 1u << k;
    }
    if (!strcmp(key, "mesh")) {
        char a[24], b[24], c[24];
        int pp, dp, tp, used = 0;
        if (sscanf(v, "PP=%23[^ \t] DP=%23[^ \t] TP=%23[^ \t]%n", a, b, c, &used) != 3 || v[used] ||
            !_vs_plan_int(a, 1, VS_PIPE_MAX_CHUNKS, &pp) || !_vs_plan_int(b, 1, INT_MAX, &dp) ||
            !_vs_plan_int(c, 1, INT_MAX, &tp))
            return vs_set_error(VS_ERR_INVALID, "%s: %s: mesh \"%s\" (PP=a DP=b TP=c, each an int >= 1, PP at most %d)",
                                fn, where, v, VS_PIPE_MAX_CHUNKS);
        if ((int64_t)pp * dp * tp > INT_MAX)
            return vs_set_error(VS_ERR_INVALID, "%s: %s: mesh \"%s\" is %lld ranks, more than an int counts", fn, where, v,
                                (long long)((int64_t)pp * dp * tp));
        p->pp = pp, p->dp = dp, p->tp = tp;
    } else if (!strcmp(key, "policy")) {
        if (!strcmp(v, "megatron")) p->policy = VS_TP_MEGATRON;
        else if (!strcmp(v, "none")) p->policy = VS_TP_NONE;
        else return vs_set_error(VS_ERR_INVALID, "%s: %s: policy \"%s\" (megatron or none)", fn, where, v);
    } else if (!strcmp(key, "shard")) {
        const char* sp = strchr(v, ' ');
        if (!sp) return vs_set_error(VS_ERR_INVALID, "%s: %s: rule \"%s\" (a pattern, a space, Replicate or Shard(d))", fn, where, v);
        const char* place = sp;
        while (*place == ' ') place++;
        return _vs_plan_rule(p, v, (size_t)(sp - v), place, where);
    } else if (!strcmp(key, "split")) {
        int s = -1;
        for (int i = 0; i <= VS_PIPE_SPLIT_TIME; i++)
            if (!strcmp(v, _vs_hl_split_names[i])) s = i;
        if (s < 0) return vs_set_error(VS_ERR_INVALID, "%s: %s: split \"%s\" (manual, uniform, parameters, flops, time)", fn, where, v);
        p->split = (vs_pipe_split_kind)s;
    } else if (!strcmp(key, "split_points")) {
        if (n >= sizeof p->split_points) return vs_set_error(VS_ERR_INVALID, "%s: %s: split_points too long", fn, where);
        memcpy(p->split_points, v, n + 1);
    } else if (!strcmp(key, "recompute")) {
        if (n >= sizeof p->recompute) return vs_set_error(VS_ERR_INVALID, "%s: %s: recompute too long", fn, where);
        memcpy(p->recompute, v, n + 1);
    } else if (!strcmp(key, "schedule")) {
        vs_pipe_kind s = VS_PIPE_1F1B;
        if (vs_pipe_kind_parse(v, &s)) return vs_set_error(VS_ERR_INVALID, "%s: %s: %s", fn, where, vs_last_error());
        p->schedule = s;
    } else { // the numbers: strict, chunks, microbatches, zero, sequence_parallel, dp_shard, reshard_after_forward, prefetch
        int hi = !strcmp(key, "zero") ? 3 : !strcmp(key, "strict") || !strcmp(key, "sequence_parallel") ||
                 !strcmp(key, "reshard_after_forward") ? 1
                 : !strcmp(key, "microbatches") ? VS_PIPE_MAX_MBS : !strcmp(key, "dp_shard") ? INT_MAX
                 : !strcmp(key, "prefetch") ? _VS_HL_MAX_PREFETCH : 1000000;
        if (!_vs_plan_int(v, 0, hi, &x)) return vs_set_error(VS_ERR_INVALID, "%s: %s: %s = \"%s\" (0..%d)", fn, where, key, v, hi);
        if (!strcmp(key, "sequence_parallel")) p->sequence_parallel = x;
        if (!strcmp(key, "strict")) p->strict = x;
        if (!strcmp(key, "chunks")) p->chunks = x;
        if (!strcmp(key, "microbatches")) p->microbatches = x;
        if (!strcmp(key, "zero")) p->zero = (vs_zero_stage)x;
        if (!strcmp(key, "dp_shard")) p->dp_shard = x;
        if (!strcmp(key, "reshard_after_forward")) p->reshard_after_forward = x, p->reshard_after_forward_set = 1;
        if (!strcmp(key, "prefetch")) p->prefetch = x, p->prefetch_set = 1;
    }
    return VS_OK;
}

/* A JSON number that is an int (mesh sizes, counts). */
_VS_HL_PRIVATE int _vs_plan_json_int(const _vs_json* J, int c)
{
    return c >= 0 && (J->nd[c].type == _VS_J_BOOL || (J->nd[c].type == _VS_J_NUM && J->nd[c].isint)) &&
           J->nd[c].i >= INT_MIN && J->nd[c].i <= INT_MAX;
}

_VS_HL_PRIVATE vs_result _vs_plan_parse_json(const char* text, vs_plan* p, int* nkeys)
{
    _vs_json J;
    vs_result r = _vs_json_parse(&J, NULL, "plan JSON", text, strlen(text));
    if (r) return vs_set_error(r, "vs_plan_parse: %s", vs_last_error());
    unsigned seen = 0;
    char v[256], where[64];
    if (J.nd[0].type != _VS_J_OBJ) r = vs_set_error(VS_ERR_INVALID, "vs_plan_parse: JSON: not an object");
    for (int c = J.nd[0].first; c >= 0 && !r; c = J.nd[c].next, ++*nkeys) {
        const _vs_jnode* x = &J.nd[c];
        snprintf(where, sizeof where, "JSON key \"%.40s\"", x->key);
        if (!strcmp(x->key, "mesh")) {
            int pp = _vs_json_get(&J, c, "pp"), dp = _vs_json_get(&J, c, "dp"), tp = _vs_json_get(&J, c, "tp");
            if (x->type != _VS_J_OBJ || x->n != 3 || !_vs_plan_json_int(&J, pp) || !_vs_plan_json_int(&J, dp) ||
                !_vs_plan_json_int(&J, tp))
                r = vs_set_error(VS_ERR_INVALID, "vs_plan_parse: %s: needs integers pp, dp, tp (and nothing else)", where);
            else {
                snprintf(v, sizeof v, "PP=%lld DP=%lld TP=%lld", (long long)J.nd[pp].i, (long long)J.nd[dp].i, (long long)J.nd[tp].i);
                r = _vs_plan_set(p, "mesh", v, where, &seen);
            }
        } else if (!strcmp(x->key, "rules")) {
            if (x->type != _VS_J_ARR) r = vs_set_error(VS_ERR_INVALID, "vs_plan_parse: %s: not an array", where);
            else if (seen & (1u << 10)) r = vs_set_error(VS_ERR_INVALID, "vs_plan_parse: %s: key \"rules\" twice", where);
            seen |= 1u << 10;
            for (int e = x->first; e >= 0 && !r; e = J.nd[e].next) {
                int pa = _vs_json_get(&J, e, "pattern"), pl = _vs_json_get(&J, e, "placement");
                if (J.nd[e].type != _VS_J_OBJ || J.nd[e].n != 2 || pa < 0 || pl < 0 || J.nd[pa].type != _VS_J_STR ||
                    J.nd[pl].type != _VS_J_STR) {
                    r = vs_set_error(VS_ERR_INVALID, "vs_plan_parse: %s: a rule is an object of strings pattern and placement", where);
                    break;
                }
                size_t at = 0;
                const char* bad = _vs_hl_text_bad(J.nd[pa].s, strlen(J.nd[pa].s) + 1, &at);
                if (!bad) bad = _vs_hl_text_bad(J.nd[pl].s, strlen(J.nd[pl].s) + 1, &at);
                if (bad) r = vs_set_error(VS_ERR_INVALID, "vs_plan_parse: %s: a rule's text %s (byte %zu)", where, bad, at);
                else r = _vs_plan_rule(p, J.nd[pa].s, strlen(J.nd[pa].s), J.nd[pl].s, where);
            }
        } else if (x->type == _VS_J_STR) r = _vs_plan_set(p, x->key, x->s, where, &seen);
        else if (_vs_plan_json_int(&J, c)) {
            snprintf(v, sizeof v, "%lld", (long long)x->i);
            r = _vs_plan_set(p, x->key, v, where, &seen);
        } else
            r = vs_set_error(VS_ERR_INVALID, "vs_plan_parse: %s: unexpected %s", where,
                             x->type == _VS_J_NUM ? "a number that is not an integer (a plan's numbers are: 3, not 3.0)"
                                                  : _vs_json_what(&J, c));
    }
    _vs_json_free(&J);
    return r;
}

VS_API vs_result vs_plan_parse(const char* text, vs_plan* out)
{
    if (!text || !out) return vs_set_error(VS_ERR_NULL, "vs_plan_parse: %s is NULL", text ? "out" : "text");
    vs_plan p;
    memset(&p, 0, sizeof p);
    const char* q = text;
    while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r') q++;
    vs_result r = VS_OK;
    int nkeys = 0;
    if (*q == '{') r = _vs_plan_parse_json(q, &p, &nkeys);
    else {
        int line = 0;
        unsigned seen = 0;
        while (*q && !r) {
            const char* e = strchr(q, '\n');
            size_t n = e ? (size_t)(e - q) : strlen(q);
            line++;
            char buf[512], where[32];
            if (n >= sizeof buf) return vs_set_error(VS_ERR_INVALID, "vs_plan_parse: line %d is too long", line);
            memcpy(buf, q, n);
            buf[n] = 0;
            q = e ? e + 1 : q + n;
            while (n && (buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t')) buf[--n] = 0;
            char* s = buf;
            while (*s == ' ' || *s == '\t') s++;
            if (!*s || *s == '#') continue;
            char* colon = strchr(s, ':');
            snprintf(where, sizeof where, "line %d", line);
            if (!colon) {
                r = vs_set_error(VS_ERR_INVALID, "vs_plan_parse: line %d: expected \"key: value\"", line);
                break;
            }
            char* k = colon;
            while (k > s && (k[-1] == ' ' || k[-1] == '\t')) k--;
            *k = 0;
            r = _vs_plan_set(&p, s, colon + 1, where, &seen);
            nkeys++;
        }
    }
    if (!r && !nkeys)
        r = vs_set_error(VS_ERR_INVALID, "vs_plan_parse: the text holds no \"key: value\" (an empty plan; vs_plan_print "
                                         "writes every key of one)");
    if (!r && p.dp_shard > 1 && _vs_hl_sz(p.dp) % p.dp_shard) // (keys in any order: checked once both are read)
        r = vs_set_error(VS_ERR_INVALID, "vs_plan_parse: dp_shard %d does not divide the mesh's DP=%d", p.dp_shard,
                         _vs_hl_sz(p.dp));
    if (!r) *out = p;
    return r;
}

VS_API vs_result vs_plan_resolve(const vs_plan* p, vs_plan* out)
{
    if (!p || !out) return vs_set_error(VS_ERR_NULL, "vs_plan_resolve: %s is NULL", p ? "out" : "plan");
    if (p->pp < 0 || p->dp < 0 || p->tp < 0 || p->chunks < 0 || p->microbatches < 0)
        return vs_set_error(VS_ERR_INVALID, "vs_plan_resolve: pp=%d dp=%d tp=%d chunks=%d microbatches=%d (>= 0; 0: default)",
                            p->pp, p->dp, p->tp, p->chunks, p->microbatches);
    if ((int)p->schedule < 0 || (int)p->schedule >= VS_PIPE_KIND_COUNT || (int)p->split < 0 ||
        p->split > VS_PIPE_SPLIT_TIME)
        return vs_set_error(VS_ERR_INVALID, "vs_plan_resolve: schedule %d, split %d", (int)p->schedule, (int)p->split);
    vs_plan r = *p;
    r.pp = _vs_hl_sz(p->pp), r.dp = _vs_hl_sz(p->dp), r.tp = _vs_hl_sz(p->tp);
    r.schedule = _vs_hl_sched(p);
    r.chunks = _vs_hl_chunks(p);
    r.microbatches = _vs_hl_mbs(p);
    r.split = _vs_hl_split(p);
    if (p->zero == VS_ZERO_3) {
        r.reshard_after_forward = _vs_hl_reshard(p), r.prefetch = _vs_hl_prefetch(p);
        r.reshard_after_forward_set = r.prefetch_set = 1;
    }
    *out = r;
    return VS_OK;
}

// >>generate-plan ---------------------------------------------------------------
/* The planner's cost model. Every figure is per optimizer step and per rank.

   What a layer declares. unit.flops is the layer's FORWARD flops per row of a
   microbatch (a row: one sample of the global batch, e.g. one sequence of T
   tokens). Its backward costs twice its forward: a layer with split backward
   parts (backward_input and backward_weight) has B = 2 (1 - w) x forward and
   W = 2 w x forward, w the profile's w_share (measured; 0: 1/2, B = W =
   forward), one with a full backward B = 2 x forward and W = 0 (the engine
   runs it whole at B). A time is flops x rows x profile.flop_s.

   What is enumerated:
   - meshes: every (pp, dp, tp) with pp x dp x tp = world that keeps the fixed
     sizes
   - a mesh is rejected whole (one entry) when pp > layers, when tp > 1 under
     the policy none, when dp does not divide the global batch, or when tp does
     not divide a TP-sharded dim (megatron roles, as vs_plan_placement: column
     weights dim 1 and their biases dim 0, row weights dim 0, embeddings dim 0,
     heads dim 1 (a head bias dim 0), norms and others replicated)
   - microbatches M in {pp, 2pp, 4pp} (or the fixed count); an M that does not
     divide the rows per DP rank is one rejected entry
   - schedules: 1f1b only on one stage (one stage runs every schedule alike,
     and 1f1b holds the least); on more, 1f1b, interleaved (2 chunks, when
     layers >= 2 pp), zbh1, zbv (2 chunks in a V, when layers >= 2 pp) and
     gpipe
   - DP forms (only ZeRO-0 when dp = 1: the stages are the same there): ZeRO
     0, 1, 2; ZeRO-3 (prefetch 1) and, with M > 1, ZeRO-3 kept gathered
     (reshard_after_forward 0) as constraints.zero3 says (default: under a
     memory limit); HSDP's ZeRO 1, 2, 3 for each shard size S that
     _vs_gp_next_shard allows (constraints.node_ranks set, DP spanning hosts,
     S x tp ranks dividing a host)

   The cost of one configuration, r = global_batch / dp / M rows a microbatch:
   - Compute. A layer with a TP-sharded parameter runs 1/tp of its flops on each
     TP rank; one without (a loss, a norm layer) runs all of them on every rank.
   - Host overheads (profile call_s, instr_s; 0: none). Each layer callback call
     adds call_s (F, B, and W for a split layer under zbh1/zbv), each compute
     instruction of the engine instr_s (per chunk and microbatch: F, B, and W
     under zbh1/zbv when the chunk has a split layer). They count as compute.
     Without them many small microbatches look free (the bench/train figures:
     ~20-30% under on PP8 x 32 microbatches).
   - TP communication (megatron, tp > 1), fully exposed, inside the layer's F
     and B costs: in the forward one all-reduce per row-parallel weight and per
     vocab-parallel embedding (partial sums), in the backward one per
     row-parallel weight (the column-parallel input's gradient) and per head
     weight.
   - A TP all-reduce's bytes: a forward one moves the layer's output, a
     backward one its input (the previous layer's output): bytes per row from
     the first output's spec ("h:f32[*,16,64]": 4096) when every dim after the
     first is fixed, else msg_bytes_per_row, else act_bytes_per_row; times r.
   - A TP all-reduce's time over n ranks: the profile's measured time for
     groups of n (ar_s, interpolated in bytes) plus its in-place extra per
     byte (tp_s: what the layers' calls cost beyond the table's); without a
     table, the ring formula 2 (n-1)/n x bytes / bw + latency.
   - The pipeline. The layers are cut into pp x V chunks by the constraints'
     split (vs_pipe_split, V placement for zbv), the schedule comes from
     vs_pipe_generate and is played by vs_pipe_simulate with each chunk's F, B
     and W (compute + TP communication) and p2p = the largest tensor crossing a
     cut x r / p2p_bw + latency. The makespan covers compute, TP communication,
     p2p waits and idle time.
   - DP. Each stage reduces its local parameter bytes over dp: ZeRO-0 an
     all-reduce, ZeRO-1/2 a reduce-scatter then an all-gather, each the
     measured all-reduce's 4 B time plus half the rest (ring formula:
     (n-1)/n x bytes / bw + latency). A group that spans hosts
     (constraints.node_ranks) takes the ring formula at inter_bw_bytes_s.
   - HSDP (shard size S, R = dp / S replicas): the reduce-scatter and the
     all-gather run within S (a host), then the owned 1/S of the gradients is
     all-reduced over the R replicas, across hosts, exposed as the DP share
     below; the optimizer state and its step are /S.
   - ZeRO-3, in the pipeline: a chunk's n groups (its layers with parameters,
     of b bytes) are all-gathered over S, G = n x half(S, b / n), before the
     forward and again before the backward, whose gradients are
     reduce-scattered (G again) a group at a time.
   - ZeRO-3 exposed, per microbatch, added to the chunk's F and B costs
     before the simulation (F, B: the chunk's compute; the first group's
     share cannot hide): forward G/n + max(0, G (1 - 1/n) - F), backward
     2G/n + max(0, 2G (1 - 1/n) - B). Without prefetch every gather shows.
     Kept gathered: no backward gather, the forward's once a step (not per
     microbatch), exposed after the pipeline.
   - DP exposed: a layer's reduction starts after its last microbatch's last
     gradient part (B, W or BW, within the simulated instruction), the
     stage's layers in bucket order (last first, every chunk's) on one
     stream; HSDP's replicas' all-reduce follows each reduce-scatter on its
     own. What runs past the makespan shows; tied parameters reduce at the
     step's end. ZeRO's all-gather, which follows the optimizer step, is
     exposed whole; ZeRO-3's replicas' all-reduce (HSDP) as the lowest
     chunk's share.
   - The optimizer step (profile opt_s per element a rank steps: the stage's
     local parameter elements, /S under ZeRO-1/2/3), after the pipeline. The
     step: makespan + the largest exposed DP time + optimizer time of any
     stage.
   - The parts, on the busiest stage (most busy time in the simulation):
     compute_s its compute (+ that optimizer time), comm_s its TP
     communication + the exposed DP time,
     bubble_s = makespan - its busy time (idle and p2p waits). They add up to
     step_s.
   - Memory per rank, on the stage that needs most: parameters (local shards,
     a tied parameter once per stage), gradients (the same; ZeRO-2: /S), AdamW
     state 2 x f32 per element (ZeRO-1/2/3: /S), activations act_bytes_per_row
     x r x (layers of the stage's largest chunk) x the schedule's peak live
     (chunk, microbatch) activations on the stage (vs_pipe_simulate's
     peak_live). ZeRO-3 at peak: parameters b/S + the groups gathered at once
     (the current and the prefetched, 2 x the stage's largest group; kept
     gathered: b), gradients b/S + one group's (before its reduce-scatter).
   - Sequence parallelism (constraints.sequence_parallel): activations are
     divided by tp only under it (without it the norms and residuals hold
     whole rows on every TP rank); its TP communication counts as the
     all-reduces it replaces (a reduce-scatter and an all-gather move the same
     bytes).
   Not counted: the engine's message copies, DDP's
   buckets, tied gradients' sums between stages, the vocab-parallel loss's
   small reductions.

   The choice: the least step_s among the configurations within the memory
   limit; equal times go to the one that needs less memory, then to the first
   enumerated (pp, then tp ascending). */

typedef struct _vs_gp_unit {
    double flops;    // forward, per row
    int sharded;     // holds a TP-sharded parameter
    int ar_f, ar_b;  // TP all-reduces per microbatch, forward and backward
    int split_bw;    // B and W separate
    double row_bytes; // its first output per row
} _vs_gp_unit;

typedef struct _vs_gp_param {
    const vs_param_decl* decl;
    int unit, twin; // twin: an earlier unit holding the same (tied) parameter, or -1
    int shared;     // used by two units (tied): reduced only at the step's end (vs_parallelize's on_step)
    int shard_dim;  // -1: replicated under TP
    double numel, bytes;
} _vs_gp_param;

typedef struct _vs_gp_est {
    vs_plan_estimate e;
    int idx;   // enumeration order
    int kind;  // 0 feasible, 1 over the memory limit, 2 rejected mesh or microbatch count
} _vs_gp_est;

typedef struct _vs_gp {
    const vs_model_desc* m;
    const vs_constraints* c;
    vs_profile prof;
    vs_pipe_split_kind split;
    int nu, np;
    vs_pipe_unit* units;
    _vs_gp_unit* gu;
    _vs_gp_param* par;
    double act_row; // activation bytes a layer keeps per row
    double inter_bw; // a DP collective's bandwidth across hosts (constraints.inter_bw_bytes_s, 0: bw)
    double* ub;      // scratch: each unit's parameter bytes on its rank (_vs_gp_unit_bytes)
    double* dx;      // scratch of the ZeRO 0-2 pipeline, 4 a unit: [4u], [4u + 1] unit u's B and W parts' time for
                     // a microbatch, [4u + 2] its gradients' ready time in the step, [4u + 3] its own (not shared)
                     // parameter bytes on its rank (_vs_gp_pipeline, _vs_gp_dp_exposed)
    _vs_gp_est* est;
    int nest, capest;
} _vs_gp;

/* snprintf through a va_list: the text may be cut, and is meant to be. */
_VS_HL_PRIVATE void _vs_gp_fmt(char* buf, size_t n, const char* fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, n, fmt, ap);
    va_end(ap);
}

/* A dim as megatron shards it along TP, -1: replicated. */
_VS_HL_PRIVATE int _vs_gp_shard_dim(const vs_param_decl* d)
{
    if (d->ndim < 1) return -1;
    switch (d->role) {
    case VS_ROLE_COLUMN: return d->ndim >= 2 ? 1 : 0;
    case VS_ROLE_ROW: return d->ndim >= 2 ? 0 : -1;
    case VS_ROLE_EMBEDDING: return 0;
    case VS_ROLE_HEAD: return d->ndim >= 2 ? 1 : 0;
    default: return -1;
    }
}

/* Bytes per row of a unit's first output from its spec ("h:f32[*,16,64]": 4096);
   0 when there is no spec or a dim after the first is free. */
_VS_HL_PRIVATE double _vs_gp_spec_row_bytes(const char* outs)
{
    const char* p = outs;
    if (!p) return 0;
    while (*p && *p != ',' && *p != ':') p++;
    if (*p != ':') return 0;
    p++;
    char dt[16];
    size_t n = 0;
    while (*p == ' ') p++;
    while (*p && *p != '[' && *p != ',' && *p != ' ' && n + 1 < sizeof dt) dt[n++] = *p++;
    dt[n] = 0;
    while (*p == ' ') p++;
    if (*p != '[') return 0;
    double bytes = 0;
    for (int t = 1; t < VS_DTYPE_COUNT; t++)
        if (!strcmp(dt, vs_dtype_name((vs_dtype)t))) bytes = (double)vs_dtype_size((vs_dtype)t);
    if (bytes == 0) return 0;
    p++;
    int dim = 0;
    for (;;) {
        while (*p == ' ') p++;
        if (*p == ']') break;
        if (*p == '*') {
            if (dim > 0) return 0;
            p++;
        } else {
            char* e;
            long long v = strtoll(p, &e, 10);
            if (e == p || v < 0) return 0;
            if (dim > 0) bytes *= (double)v;
            p = e;
        }
        dim++;
        while (*p == ' ') p++;
        if (*p == ',') p++;
        else if (*p != ']') return 0;
    }
    return dim > 1 ? bytes : 0;
}

/* 4 significant digits; a unit's threshold is where %.4g of the smaller one would
   print 1000 (0.99999e-3 s is "1 ms", not "1000 us"). */
#define _VS_GP_UP 0.99995
_VS_HL_PRIVATE const char* _vs_gp_fmt_time(double s, char* b, size_t n)
{
    if (s >= _VS_GP_UP || s == 0) snprintf(b, n, "%.4g s", s);
    else if (s >= _VS_GP_UP * 1e-3) snprintf(b, n, "%.4g ms", s * 1e3);
    else if (s >= _VS_GP_UP * 1e-6) snprintf(b, n, "%.4g us", s * 1e6);
    else snprintf(b, n, "%.4g ns", s * 1e9);
    return b;
}

_VS_HL_PRIVATE const char* _vs_gp_fmt_bytes(double x, char* b, size_t n)
{
    if (x >= _VS_GP_UP * 1e9) snprintf(b, n, "%.4g GB", x / 1e9);
    else if (x >= _VS_GP_UP * 1e6) snprintf(b, n, "%.4g MB", x / 1e6);
    else if (x >= _VS_GP_UP * 1e3) snprintf(b, n, "%.4g KB", x / 1e3);
    else snprintf(b, n, "%.4g B", x);
    return b;
}

/* "PP2 x DP2 x TP2, zbv, 2 chunks per stage, 8 microbatches, ZeRO-1" (", sequence
   parallel" with it), every default as it resolves. HSDP: "ZeRO-3 HSDP DPR2 x
   DPS4" (the mesh's replicate and shard dims); ZeRO-3 with
   reshard_after_forward 0: "kept gathered"; a prefetch other than 1 named. */
_VS_HL_PRIVATE const char* _vs_gp_fmt_plan(const vs_plan* p, char* b, size_t n)
{
    int V = _vs_hl_chunks(p), M = _vs_hl_mbs(p), tp = _vs_hl_sz(p->tp), S = _vs_hl_shard(p), z3 = p->zero == VS_ZERO_3;
    char h[48] = "", k[48] = "";
    if (S) snprintf(h, sizeof h, " HSDP DPR%d x DPS%d", _vs_hl_sz(p->dp) / S, S);
    if (z3 && !_vs_hl_reshard(p)) snprintf(k, sizeof k, ", kept gathered");
    if (z3 && _vs_hl_prefetch(p) != 1) snprintf(k + strlen(k), sizeof k - strlen(k), ", prefetch %d", _vs_hl_prefetch(p));
    _vs_gp_fmt(b, n, "PP%d x DP%d x TP%d, %s, %d chunk%s per stage, %d microbatch%s, ZeRO-%d%s%s%s%s", _vs_hl_sz(p->pp),
               _vs_hl_sz(p->dp), tp, vs_pipe_kind_name(_vs_hl_sched(p)), V, V == 1 ? "" : "s", M, M == 1 ? "" : "es",
               (int)p->zero, h, k, p->sequence_parallel && tp > 1 ? ", sequence parallel" : "",
               p->recompute[0] ? ", recompute" : "");
    return b;
}

/* The TP all-reduces a parameter's layer makes per microbatch under the megatron
   policy (added to *f forward, *b backward): a row-parallel weight's partial
   output (forward) and its input's gradient, which the column-parallel layer
   before left partial (backward); a vocab-parallel embedding's partial rows
   (forward); a vocab-parallel head's input gradient (backward). */
_VS_HL_PRIVATE void _vs_gp_tp_calls(const vs_param_decl* d, int* f, int* b)
{
    if (d->ndim >= 2 && d->role == VS_ROLE_ROW) ++*f, ++*b;
    if (d->role == VS_ROLE_EMBEDDING) ++*f;
    if (d->ndim >= 2 && d->role == VS_ROLE_HEAD) ++*b;
}

/* The profile's in-place extra per byte of a TP collective on groups of n (0: none). */
_VS_HL_PRIVATE double _vs_gp_tp_extra(const vs_profile* pf, int n)
{
    for (int g = 0; g < VS_PROFILE_AR_GROUPS; g++)
        if (pf->ar_n[g] == n) return pf->tp_s[g];
    return 0;
}

_VS_HL_PRIVATE double _vs_gp_ring(double bytes, int n, double steps, const vs_profile* pf)
{
    if (n <= 1) return 0;
    return steps * (n - 1) / n * bytes / pf->bw_bytes_s + pf->latency_s;
}

/* The message sizes of vs_profile's all-reduce table. */
static const double _vs_gp_ar_bytes[VS_PROFILE_AR_SIZES] = {4, 65536, 524288, 4194304};

/* The profile's all-reduce row for groups of n, or NULL (none, or not all > 0). */
_VS_HL_PRIVATE const double* _vs_gp_ar_row(const vs_profile* pf, int n)
{
    for (int g = 0; g < VS_PROFILE_AR_GROUPS; g++) {
        if (pf->ar_n[g] != n) continue;
        for (int k = 0; k < VS_PROFILE_AR_SIZES; k++)
            if (!(pf->ar_s[g][k] > 0)) return NULL;
        return pf->ar_s[g];
    }
    return NULL;
}

/* An all-reduce of `bytes` over n ranks: the measured row, interpolated linearly
   between its sizes (the last two extended beyond 4 MiB; never below the 4 B
   time), else the ring formula from bw and latency. */
_VS_HL_PRIVATE double _vs_gp_allreduce(const vs_profile* pf, int n, double bytes)
{
    if (n <= 1) return 0;
    const double* t = _vs_gp_ar_row(pf, n);
    if (!t) return _vs_gp_ring(bytes, n, 2, pf);
    const double* x = _vs_gp_ar_bytes;
    if (bytes <= x[0]) return t[0];
    int k = 1;
    while (k < VS_PROFILE_AR_SIZES - 1 && bytes > x[k]) k++;
    double v = t[k - 1] + (t[k] - t[k - 1]) * (bytes - x[k - 1]) / (x[k] - x[k - 1]);
    return v > t[0] ? v : t[0];
}

/* A reduce-scatter or an all-gather: half an all-reduce's volume, one latency
   (measured row: its 4 B time plus half of the rest). */
_VS_HL_PRIVATE double _vs_gp_half(const vs_profile* pf, int n, double bytes)
{
    if (n <= 1) return 0;
    const double* t = _vs_gp_ar_row(pf, n);
    if (!t) return _vs_gp_ring(bytes, n, 1, pf);
    return t[0] + (_vs_gp_allreduce(pf, n, bytes) - t[0]) / 2;
}

/* A layer's TP all-reduce of `bytes` over n ranks: the table's time plus the
   profile's in-place extra for that many bytes (never below 0). */
_VS_HL_PRIVATE double _vs_gp_tp_ar(const vs_profile* pf, int n, double bytes)
{
    double t = _vs_gp_allreduce(pf, n, bytes) + _vs_gp_tp_extra(pf, n) * bytes;
    return t > 0 ? t : 0;
}

/* A new entry for (pp, dp, tp, kind, V, M, zero); NULL when out of memory. */
_VS_HL_PRIVATE _vs_gp_est* _vs_gp_push(_vs_gp* g, int pp, int dp, int tp, vs_pipe_kind kind, int V, int M, int zero)
{
    if (g->nest == g->capest) {
        int cap = g->capest ? 2 * g->capest : 64;
        _vs_gp_est* e = (_vs_gp_est*)vs_alloc(NULL, (size_t)cap * sizeof *e);
        if (!e) return NULL;
        if (g->nest) memcpy(e, g->est, (size_t)g->nest * sizeof *e);
        vs_free(NULL, g->est);
        g->est = e, g->capest = cap;
    }
    _vs_gp_est* e = &g->est[g->nest];
    memset(e, 0, sizeof *e);
    e->idx = g->nest++;
    vs_plan* p = &e->e.plan;
    p->pp = pp, p->dp = dp, p->tp = tp;
    p->policy = g->c->policy;
    p->split = g->split;
    p->chunks = V;
    p->schedule = kind;
    p->microbatches = M;
    p->zero = (vs_zero_stage)zero;
    p->sequence_parallel = g->c->sequence_parallel && tp > 1;
    return e;
}

_VS_HL_PRIVATE vs_result _vs_gp_reject(_vs_gp* g, int pp, int dp, int tp, int M, const char* fmt, ...)
{
    _vs_gp_est* e = _vs_gp_push(g, pp, dp, tp, VS_PIPE_1F1B, 1, M, 0);
    if (!e) return vs_set_error(VS_ERR_NOMEM, "vs_generate_plan: out of memory");
    e->kind = 2;
    e->e.step_s = e->e.mem_bytes = HUGE_VAL;
    char cfg[64];
    snprintf(cfg, sizeof cfg, "PP%d x DP%d x TP%d: ", pp, dp, tp);
    size_t l = strlen(cfg);
    memcpy(e->e.why, cfg, l + 1);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->e.why + l, sizeof e->e.why - l, fmt, ap);
    va_end(ap);
    return VS_OK;
}

/* A whole mesh that cannot work: why, or NULL. */
_VS_HL_PRIVATE int _vs_gp_mesh_check(_vs_gp* g, int pp, int dp, int tp, char* why, size_t n)
{
    const vs_constraints* c = g->c;
    if (pp > g->nu) {
        _vs_gp_fmt(why, n, "pp=%d: more stages than the model's %d layers", pp, g->nu);
        return 0;
    }
    if (tp > 1 && c->policy == VS_TP_NONE) {
        _vs_gp_fmt(why, n, "tp=%d: the TP policy is none, nothing is sharded", tp);
        return 0;
    }
    for (int i = 0; tp > 1 && i < g->np; i++) {
        const _vs_gp_param* q = &g->par[i];
        if (q->shard_dim < 0) continue;
        const vs_param_decl* d = q->decl;
        int64_t s = d->shape[q->shard_dim];
        if (s % tp || (d->shard_unit > 1 && (s / tp) % d->shard_unit)) {
            if (s % tp)
                _vs_gp_fmt(why, n, "tp=%d does not divide %s's %lld %s", tp, d->name ? d->name : "?", (long long)s,
                           d->ndim == 1 ? "entries" : q->shard_dim == 1 ? "columns" : "rows");
            else
                _vs_gp_fmt(why, n, "tp=%d does not divide %s's %lld heads (blocks of %lld)", tp, d->name ? d->name : "?",
                           (long long)(s / d->shard_unit), (long long)d->shard_unit);
            return 0;
        }
    }
    if (c->global_batch % dp) {
        _vs_gp_fmt(why, n, "dp=%d does not divide the global batch of %lld rows", dp, (long long)c->global_batch);
        return 0;
    }
    return 1;
}

/* The pipeline part of a configuration: makespan and the busiest stage's parts,
   and what memory and DP need per stage. */
typedef struct _vs_gp_pipe {
    double makespan, comp, comm, busy; // comp, comm, busy: the busiest stage's
    double pbytes[VS_PIPE_MAX_CHUNKS], pnumel[VS_PIPE_MAX_CHUNKS], last_share[VS_PIPE_MAX_CHUNKS];
    double shared[VS_PIPE_MAX_CHUNKS]; // the share of pbytes in parameters two units use (reduced at the step's end)
    double act[VS_PIPE_MAX_CHUNKS]; // activation bytes per stage
    double gmax[VS_PIPE_MAX_CHUNKS];  // the stage's largest group (a unit's parameters), bytes
    double once[VS_PIPE_MAX_CHUNKS];  // ZeRO-3 kept gathered: the stage's exposed gathers, once a step
} _vs_gp_pipe;

/* ZeRO-3's traffic inside the pipeline (NULL: none): the shard group's size and
   span (ranks from its first to its last), reshard_after_forward, prefetch. */
typedef struct _vs_gp_z3 {
    int shard, span, reshard, prefetch;
} _vs_gp_z3;

/* A DP collective over n ranks whose group spans `span` consecutive ranks
   (steps 2: an all-reduce, 1: a reduce-scatter or an all-gather): within a host
   the profile's figures, across hosts (constraints.node_ranks, span larger)
   the ring formula at the hosts' bandwidth. */
_VS_HL_PRIVATE double _vs_gp_dpcoll(const _vs_gp* g, int n, int span, double bytes, int steps)
{
    if (n <= 1) return 0;
    if (g->c->node_ranks > 0 && span > g->c->node_ranks)
        return steps * (n - 1.0) / n * bytes / g->inter_bw + g->prof.latency_s;
    return steps == 2 ? _vs_gp_allreduce(&g->prof, n, bytes) : _vs_gp_half(&g->prof, n, bytes);
}

/* The exposed part of a pass's ZeRO-3 traffic over its n groups: gathers G that
   the compute waits for, reduce-scatters B behind it, compute C. Prefetched,
   only the first group's share and what C cannot cover show; without, every
   gather shows. (The last group's reduce-scatter always does.) */
_VS_HL_PRIVATE double _vs_gp_z3_exposed(double G, double B, double C, int n, int prefetch)
{
    if (n < 1) return 0;
    double hidden = prefetch ? (G + B) * (1 - 1.0 / n) : B * (1 - 1.0 / n);
    return G + B - hidden + (hidden > C ? hidden - C : 0);
}

/* Each unit's parameter bytes on its rank under (pl, tp) into g->ub: TP shards
   divided, a tied parameter once a stage. */
_VS_HL_PRIVATE void _vs_gp_unit_bytes(_vs_gp* g, const vs_pipe_plan* pl, int tp)
{
    for (int u = 0; u < g->nu; u++) g->ub[u] = 0;
    for (int i = 0; i < g->np; i++) {
        const _vs_gp_param* q = &g->par[i];
        int p = -1, pt = -1;
        vs_pipe_unit_chunk(pl, q->unit, &p);
        if (q->twin >= 0 && vs_pipe_unit_chunk(pl, q->twin, &pt) >= 0 && pt == p) continue;
        g->ub[q->unit] += q->bytes / (q->shard_dim >= 0 ? tp : 1);
    }
}

/* Each unit's gradients' ready time in the simulated step (t0: its
   instructions' starts, then ends) into g->dx[4u + 2]: the end of its last
   gradient part of the last microbatch, where the library's unit hook marks
   them (grads_final): W of a split unit, B of the others, or BW. Within an
   instruction the units run last to first, each for its part's time, counted
   back from the instruction's end (its overhead at the start). */
_VS_HL_PRIVATE void _vs_gp_ready(_vs_gp* g, const vs_pipe_plan* pl, const vs_pipe_sched* s, const double* t0, int M)
{
    size_t n = 0, o = 0;
    for (int p = 0; p < s->stages; p++) n += (size_t)s->len[p];
    for (int u = 0; u < g->nu; u++) g->dx[4 * u + 2] = 0;
    for (int p = 0; p < s->stages; o += (size_t)s->len[p], p++)
        for (int i = 0; i < s->len[p]; i++) {
            const int op = s->ins[p][i].op, k = s->ins[p][i].chunk;
            if (s->ins[p][i].mb != M - 1 || !(op == VS_PIPE_B || op == VS_PIPE_W || op == VS_PIPE_BW)) continue;
            double t = t0[n + o + (size_t)i];
            for (int u = pl->first_unit[k]; u < pl->first_unit[k + 1]; u++) {
                const int split = g->gu[u].split_bw;
                if (op == VS_PIPE_BW || (op == VS_PIPE_W) == split) g->dx[4 * u + 2] = t;
                t -= (op != VS_PIPE_W ? g->dx[4 * u] : 0) + (op != VS_PIPE_B ? g->dx[4 * u + 1] : 0);
            }
        }
}

_VS_HL_PRIVATE vs_result _vs_gp_pipeline(_vs_gp* g, const vs_pipe_plan* pl, int tp, vs_pipe_kind kind, int M,
                                         double rows, int rc, const _vs_gp_z3* z, _vs_gp_pipe* out)
{
    const vs_profile* pf = &g->prof;
    int K = pl->nchunks, P = pl->stages;
    memset(out, 0, sizeof *out);
    _vs_gp_unit_bytes(g, pl, tp);
    double cf[VS_PIPE_MAX_CHUNKS], cb[VS_PIPE_MAX_CHUNKS], cw[VS_PIPE_MAX_CHUNKS];
    double comp[VS_PIPE_MAX_CHUNKS], comm[VS_PIPE_MAX_CHUNKS];
    double p2p = 0;
    const double ws = pf->w_share > 0 ? pf->w_share : 0.5; // a split unit's backward: B 2(1 - ws) f, W 2 ws f
    const int zb = kind == VS_PIPE_ZBH1 || kind == VS_PIPE_ZBV; // B and W run apart
    for (int k = 0; k < K; k++) {
        int nsplit = 0;
        cf[k] = cb[k] = cw[k] = comp[k] = comm[k] = 0;
        for (int u = pl->first_unit[k]; u < pl->first_unit[k + 1]; u++) {
            const _vs_gp_unit* x = &g->gu[u];
            double f = x->flops * rows * pf->flop_s / (x->sharded ? tp : 1);
            double ob = (x->row_bytes > 0 ? x->row_bytes : g->act_row) * rows;
            double ib = (u > 0 && g->gu[u - 1].row_bytes > 0 ? g->gu[u - 1].row_bytes : g->act_row) * rows;
            double tf = tp > 1 ? x->ar_f * _vs_gp_tp_ar(pf, tp, ob) : 0;
            double tb = tp > 1 ? x->ar_b * _vs_gp_tp_ar(pf, tp, ib) : 0;
            cf[k] += f + tf + pf->call_s;
            const double fb = x->split_bw ? 2 * (1 - ws) * f : 2 * f, fw = x->split_bw ? 2 * ws * f : 0;
            cb[k] += fb + tb + pf->call_s;
            if (rc) cb[k] += f + tf + pf->call_s, comp[k] += f + pf->call_s, comm[k] += tf; // its forward again first
            cw[k] += x->split_bw ? fw + (zb ? pf->call_s : 0) : 0;
            if (!z) // the unit's B part (its recomputed forward first) and W part, as the engine runs them
                g->dx[4 * u] = fb + tb + pf->call_s + (rc ? f + tf + pf->call_s : 0),
                g->dx[4 * u + 1] = x->split_bw ? fw + (zb ? pf->call_s : 0) : 0;
            nsplit += x->split_bw;
            comp[k] += 3 * f + (2 + (zb && x->split_bw)) * pf->call_s, comm[k] += tf + tb;
        }
        /* the engine's time per instruction: F, B and (zero-bubble kinds, with a
           split unit) W; a BW is charged once, as cb + cw */
        cf[k] += pf->instr_s, cb[k] += pf->instr_s;
        comp[k] += 2 * pf->instr_s;
        if (zb && nsplit) cw[k] += pf->instr_s, comp[k] += pf->instr_s;
        if (z) { // ZeRO-3: the chunk's groups gathered (and its gradients reduce-scattered) on the comm stream
            double kb = 0;
            int ng = 0;
            for (int u = pl->first_unit[k]; u < pl->first_unit[k + 1]; u++) kb += g->ub[u], ng += g->ub[u] > 0;
            double G = ng ? ng * _vs_gp_dpcoll(g, z->shard, z->span, kb / ng, 1) : 0;
            double ef = z->reshard ? _vs_gp_z3_exposed(G, 0, cf[k], ng, z->prefetch) : 0;
            double eb = _vs_gp_z3_exposed(z->reshard ? G : 0, G, cb[k] + cw[k], ng, z->prefetch);
            if (!z->reshard) out->once[pl->chunk_stage[k]] += _vs_gp_z3_exposed(G, 0, cf[k], ng, z->prefetch);
            cf[k] += ef, cb[k] += eb, comm[k] += ef + eb;
        }
        if (k + 1 < K && P > 1) {
            const _vs_gp_unit* x = &g->gu[pl->first_unit[k + 1] - 1];
            double t = (x->row_bytes > 0 ? x->row_bytes : g->act_row) * rows / pf->p2p_bw_bytes_s + pf->latency_s;
            if (t > p2p) p2p = t;
        }
    }
    vs_pipe_sched* s = NULL;
    vs_pipe_sim sim;
    vs_pipe_costs costs;
    double* t0 = NULL;
    memset(&costs, 0, sizeof costs);
    costs.p2p = p2p, costs.chunk_f = cf, costs.chunk_b = cb, costs.chunk_w = cw;
    vs_result r = vs_pipe_generate(NULL, kind, P, pl->chunks, M, &s);
    if (r == VS_OK) r = z ? vs_pipe_simulate(s, &costs, &sim) : _vs_pipe_sim_times(s, &costs, &sim, &t0);
    if (r == VS_OK && !z) _vs_gp_ready(g, pl, s, t0, M);
    vs_free(NULL, t0);
    vs_pipe_sched_free(s);
    if (r != VS_OK) return r;
    out->makespan = sim.makespan;
    int best = -1;
    for (int p = 0; p < P; p++) {
        double c0 = 0, c1 = 0;
        for (int k = 0; k < K; k++)
            if (pl->chunk_stage[k] == p) c0 += comp[k] * M, c1 += comm[k] * M;
        if (best < 0 || sim.busy[p] > out->busy) out->busy = sim.busy[p], out->comp = c0, out->comm = c1, best = p;
    }
    // memory and DP per stage
    double low[VS_PIPE_MAX_CHUNKS], keep[VS_PIPE_MAX_CHUNKS];
    int lowest[VS_PIPE_MAX_CHUNKS], maxl[VS_PIPE_MAX_CHUNKS];
    for (int p = 0; p < P; p++) lowest[p] = -1, maxl[p] = 0, low[p] = 0, keep[p] = 0;
    for (int u = 0; u < g->nu && !z; u++) g->dx[4 * u + 3] = 0;
    for (int k = 0; k < K; k++) {
        int p = pl->chunk_stage[k], nl = pl->first_unit[k + 1] - pl->first_unit[k];
        if (lowest[p] < 0) lowest[p] = k;
        if (nl > maxl[p]) maxl[p] = nl;
        /* recompute: a layer keeps only its output between forward and backward
           (its first output's bytes per row, at most act_bytes_per_row; unknown:
           all of it) */
        double kb = 0;
        for (int u = pl->first_unit[k]; u < pl->first_unit[k + 1]; u++)
            kb += g->gu[u].row_bytes > 0 && g->gu[u].row_bytes < g->act_row ? g->gu[u].row_bytes : g->act_row;
        if (kb > keep[p]) keep[p] = kb;
        for (int u = pl->first_unit[k]; u < pl->first_unit[k + 1]; u++)
            if (g->ub[u] > out->gmax[p]) out->gmax[p] = g->ub[u];
    }
    for (int i = 0; i < g->np; i++) {
        const _vs_gp_param* q = &g->par[i];
        int p = -1, pt = -1, k = vs_pipe_unit_chunk(pl, q->unit, &p);
        if (q->twin >= 0 && vs_pipe_unit_chunk(pl, q->twin, &pt) >= 0 && pt == p)
            continue; // the same parameter, already on this stage
        double div = q->shard_dim >= 0 ? tp : 1;
        out->pbytes[p] += q->bytes / div;
        out->pnumel[p] += q->numel / div;
        if (k == lowest[p]) low[p] += q->bytes / div;
        if (q->shared) out->shared[p] += q->bytes / div;
        else if (!z) g->dx[4 * q->unit + 3] += q->bytes / div;
    }
    for (int p = 0; p < P; p++) {
        out->last_share[p] = out->pbytes[p] > 0 ? low[p] / out->pbytes[p] : 0;
        out->shared[p] = out->pbytes[p] > 0 ? out->shared[p] / out->pbytes[p] : 0;
        double live = rc ? keep[p] * sim.peak_live[p] + g->act_row : g->act_row * maxl[p] * sim.peak_live[p];
        out->act[p] = live * rows / (g->c->sequence_parallel ? tp : 1); // (recompute: one layer's whole, in its backward)
    }
    return VS_OK;
}

/* The HSDP shard sizes the planner weighs after s (0: from the start), -1 when
   none is left: divisors S of dp, 1 < S < dp, whose groups (S x tp
   consecutive ranks) fit within a host, where DP spans hosts. Without
   constraints.node_ranks none: on one host HSDP only adds memory. */
_VS_HL_PRIVATE int _vs_gp_next_shard(const _vs_gp* g, int dp, int tp, int s)
{
    int N = g->c->node_ranks;
    if (N <= 0 || (int64_t)dp * tp <= N) return -1;
    for (int S = s < 2 ? 2 : s + 1; S < dp; S++)
        if (dp % S == 0 && (int64_t)S * tp <= N && N % (S * tp) == 0) return S;
    return -1;
}

/* The exposed part of stage p's gradient reduction (ZeRO 0-2; pi: their
   pipeline): T1 seconds in all on DP's stream, then (HSDP, ZeRO-1/2) T2 of the
   replicas' all-reduce on theirs. Each layer's share launches in bucket order
   (the stage's last layer first, every chunk's) once it is ready
   (_vs_gp_ready) and the one before has launched: with few microbatches every
   chunk's last backward comes near the step's end, and they queue up. What
   runs past the pipeline's end shows; tied parameters reduce after it. */
_VS_HL_PRIVATE double _vs_gp_dp_exposed(const _vs_gp* g, const vs_pipe_plan* pl, const _vs_gp_pipe* pi, int p, double T1,
                                        double T2)
{
    if (!(pi->pbytes[p] > 0)) return 0;
    double a = 0, b = 0; // where the two streams' queues end
    for (int k = pl->nchunks - 1; k >= 0; k--)
        for (int u = pl->first_unit[k + 1] - 1; u >= pl->first_unit[k] && pl->chunk_stage[k] == p; u--) {
            double sh = g->dx[4 * u + 3] / pi->pbytes[p];
            if (!(sh > 0)) continue;
            a = (a > g->dx[4 * u + 2] ? a : g->dx[4 * u + 2]) + T1 * sh;
            b = (b > a ? b : a) + T2 * sh;
        }
    return (b > pi->makespan ? b - pi->makespan : 0) + (T1 + T2) * pi->shared[p];
}

/* Estimates one DP form (zero, HSDP shard size or 0, ZeRO-3's
   reshard_after_forward) of a configuration whose pipeline is pi. */
_VS_HL_PRIVATE vs_result _vs_gp_form(_vs_gp* g, const vs_pipe_plan* pl, int dp, int tp, vs_pipe_kind kind, int M, int rc,
                                     int zero, int shard, int reshard, const _vs_gp_pipe* pi)
{
    const vs_constraints* c = g->c;
    const vs_profile* pf = &g->prof;
    const int P = pl->stages, S = shard ? shard : dp, R = dp / S, pf1 = 1; // (the planner weighs prefetch 1)
    _vs_gp_est* e = _vs_gp_push(g, P, dp, tp, kind, pl->chunks, M, zero);
    if (!e) return vs_set_error(VS_ERR_NOMEM, "vs_generate_plan: out of memory");
    vs_plan* plan = &e->e.plan;
    if (rc) snprintf(plan->recompute, sizeof plan->recompute, "*"); // every layer
    plan->dp_shard = shard;
    if (zero == 3) plan->reshard_after_forward = reshard, plan->prefetch = pf1, plan->reshard_after_forward_set = plan->prefetch_set = 1;
    double dpx = 0, opx = 0, mem = -1;
    for (int p = 0; p < P; p++) {
        /* the reduction (and HSDP's all-reduce of the owned shard over the
           replicas) runs under the backward from each layer's last microbatch
           on (_vs_gp_dp_exposed); ZeRO-1/2's gather follows the optimizer step,
           whole; ZeRO-3's traffic is in the pipeline, the replicas' share of its
           lowest chunk shows */
        double b = pi->pbytes[p], x;
        double gb = c->grad_fp32 ? 4 * pi->pnumel[p] : b; // the gradients' bytes
        double xr = _vs_gp_dpcoll(g, R, dp * tp, gb / S, 2);
        if (zero == 0) x = _vs_gp_dp_exposed(g, pl, pi, p, _vs_gp_dpcoll(g, dp, dp * tp, gb, 2), 0);
        else if (zero < 3) x = _vs_gp_dp_exposed(g, pl, pi, p, _vs_gp_dpcoll(g, S, S * tp, gb, 1), xr) +
                               _vs_gp_dpcoll(g, S, S * tp, b, 1);
        else x = xr * pi->last_share[p] + pi->once[p];
        double o = pf->opt_s * pi->pnumel[p] / (zero ? S : 1); // the optimizer's step, after the pipeline
        if (x + o > dpx + opx) dpx = x, opx = o;
        /* ZeRO-3 at peak: the owned shards, the groups gathered at once (the
           current and the prefetched; kept: the stage's all) and one group's
           gradients before its reduce-scatter */
        double held = reshard ? (1 + pf1) * pi->gmax[p] : b;
        double mp = zero == 3 ? b / S + (held < b ? held : b) : b;
        double mg = zero == 3 ? b / S + pi->gmax[p] : zero == 2 ? gb / S : gb;
        double mo = 8 * pi->pnumel[p] / (zero ? S : 1), ma = pi->act[p];
        if (mp + mg + mo + ma > mem) {
            mem = mp + mg + mo + ma;
            e->e.mem_params = mp, e->e.mem_grads = mg, e->e.mem_optim = mo, e->e.mem_act = ma;
        }
    }
    vs_plan_estimate* x = &e->e;
    x->compute_s = pi->comp + opx;
    x->comm_s = pi->comm + dpx;
    x->bubble_s = pi->makespan > pi->busy ? pi->makespan - pi->busy : 0;
    x->step_s = x->compute_s + x->comm_s + x->bubble_s;
    x->mem_bytes = mem;
    x->feasible = !(c->mem_limit_bytes > 0 && mem > c->mem_limit_bytes);
    if (!x->feasible) {
        char a[32], b[32], d[32], cfg[192];
        e->kind = 1;
        _vs_gp_fmt(x->why, sizeof x->why, "%s: exceeds memory by %s (needs %s, limit %s)",
                   _vs_gp_fmt_plan(&x->plan, cfg, sizeof cfg), _vs_gp_fmt_bytes(mem - c->mem_limit_bytes, a, sizeof a),
                   _vs_gp_fmt_bytes(mem, b, sizeof b), _vs_gp_fmt_bytes(c->mem_limit_bytes, d, sizeof d));
    }
    return VS_OK;
}

/* Estimates every DP form of (pp, dp, tp, kind, V, M), without recompute (rc 0)
   or with every layer recomputed (rc 1): ZeRO 0; then for no HSDP and each HSDP
   shard size, ZeRO 1, 2, and where constraints.zero3 says, 3 and 3 kept
   gathered (reshard_after_forward 0) when there are microbatches to keep it
   over. pi: scratch for 2. */
_VS_HL_PRIVATE vs_result _vs_gp_config_rc(_vs_gp* g, const vs_pipe_plan* pl, int dp, int tp, vs_pipe_kind kind, int M,
                                          int rc, _vs_gp_pipe* pi)
{
    const int P = pl->stages;
    double rows = (double)(g->c->global_batch / dp / M);
    vs_result r = _vs_gp_pipeline(g, pl, tp, kind, M, rows, rc, NULL, pi);
    if (r != VS_OK) {
        char msg[120];
        _vs_gp_fmt(msg, sizeof msg, "%s", vs_last_error());
        vs_clear_error();
        return _vs_gp_reject(g, P, dp, tp, M, "%s: %s", vs_pipe_kind_name(kind), msg);
    }
    r = _vs_gp_form(g, pl, dp, tp, kind, M, rc, 0, 0, 1, pi);
    const int z3 = g->c->zero3 > 0 || (g->c->zero3 == 0 && g->c->mem_limit_bytes > 0);
    for (int s = dp > 1 ? 0 : -1; s >= 0 && !r; s = _vs_gp_next_shard(g, dp, tp, s))
        for (int v = 1; v <= (z3 ? 4 : 2) && !r; v++) {
            if (v == 4 && M == 1) continue; // kept gathered: the same traffic, more memory
            if (v >= 3) {
                _vs_gp_z3 z = {s ? s : dp, (s ? s : dp) * tp, v == 3, 1};
                r = _vs_gp_pipeline(g, pl, tp, kind, M, rows, rc, &z, &pi[1]);
                if (r) return r; // (the same pipeline as above, with other costs)
            }
            r = _vs_gp_form(g, pl, dp, tp, kind, M, rc, v >= 3 ? 3 : v, s, v == 3, v >= 3 ? &pi[1] : pi);
        }
    return r;
}

/* Estimates every DP form of (pp, dp, tp, kind, V, M), with and without
   recompute as the constraints allow. */
_VS_HL_PRIVATE vs_result _vs_gp_config(_vs_gp* g, const vs_pipe_plan* pl, int dp, int tp, vs_pipe_kind kind, int M)
{
    _vs_gp_pipe* pi = (_vs_gp_pipe*)vs_alloc(NULL, 2 * sizeof *pi);
    if (!pi) return vs_set_error(VS_ERR_NOMEM, "vs_generate_plan: out of memory");
    vs_result r = VS_OK;
    int lo = g->c->recompute > 0, hi = g->c->recompute > 0 || (g->c->recompute == 0 && g->c->mem_limit_bytes > 0);
    for (int rc = lo; rc <= hi && !r; rc++)
        r = _vs_gp_config_rc(g, pl, dp, tp, kind, M, rc, pi);
    vs_free(NULL, pi);
    return r;
}

_VS_HL_PRIVATE int _vs_gp_cmp(const void* a, const void* b)
{
    const _vs_gp_est *x = (const _vs_gp_est*)a, *y = (const _vs_gp_est*)b;
    int fx = x->kind != 0, fy = y->kind != 0;
    if (fx != fy) return fx - fy;
    if (!fx) {
        if (x->e.step_s != y->e.step_s) return x->e.step_s < y->e.step_s ? -1 : 1;
        if (x->e.mem_bytes != y->e.mem_bytes) return x->e.mem_bytes < y->e.mem_bytes ? -1 : 1;
    } else if (x->kind != y->kind) {
        return x->kind - y->kind;
    } else if (x->kind == 1 && x->e.mem_bytes != y->e.mem_bytes) {
        return x->e.mem_bytes < y->e.mem_bytes ? -1 : 1;
    }
    return x->idx - y->idx;
}

/* Why a feasible configuration lost to the best: its largest excess part.
   "<plan>: <reason>", the reason a phrase that reads after "why it lost: "
   (vs_plan_explain) and after the plan alone; vs_plan_explain groups the
   others by the words "bubble", "exposed communication", "compute" and "as
   fast as" in it. */
_VS_HL_PRIVATE void _vs_gp_why_lost(_vs_gp_est* e, const _vs_gp_est* best)
{
    vs_plan_estimate *x = &e->e;
    const vs_plan_estimate* b = &best->e;
    char cfg[192], t0[32], t1[32];
    double dc = x->compute_s - b->compute_s, dm = x->comm_s - b->comm_s, db = x->bubble_s - b->bubble_s;
    _vs_gp_fmt_plan(&x->plan, cfg, sizeof cfg);
    _vs_gp_fmt_time(x->step_s - b->step_s, t1, sizeof t1);
    if (x->step_s == b->step_s && x->mem_bytes > b->mem_bytes)
        _vs_gp_fmt(x->why, sizeof x->why, "%s: as fast as the best but needs more memory, %s a rank against %s", cfg,
                   _vs_gp_fmt_bytes(x->mem_bytes, t0, sizeof t0), _vs_gp_fmt_bytes(b->mem_bytes, t1, sizeof t1));
    else if (x->step_s == b->step_s)
        _vs_gp_fmt(x->why, sizeof x->why, "%s: as fast as the best and needs as much memory; the best was enumerated first", cfg);
    else if (db >= dc && db >= dm)
        _vs_gp_fmt(x->why, sizeof x->why, "%s: a larger bubble (%.0f%% of its step at %d microbatches), +%s a step over the best",
                   cfg, x->step_s > 0 ? 100 * x->bubble_s / x->step_s : 0.0, x->plan.microbatches, t1);
    else if (dm >= dc)
        _vs_gp_fmt(x->why, sizeof x->why, "%s: more exposed communication (%s), +%s a step over the best", cfg,
                   _vs_gp_fmt_time(x->comm_s, t0, sizeof t0), t1);
    else
        _vs_gp_fmt(x->why, sizeof x->why, "%s: more compute per rank (%s), +%s a step over the best", cfg,
                   _vs_gp_fmt_time(x->compute_s, t0, sizeof t0), t1);
}

_VS_HL_PRIVATE vs_result _vs_gp_setup(_vs_gp* g)
{
    const vs_model_desc* m = g->m;
    const vs_constraints* c = g->c;
    g->nu = m->nlayers;
    g->np = 0;
    for (int u = 0; u < m->nlayers; u++) {
        if (m->layers[u].nparams < 0 || m->layers[u].nparams > VS_LAYER_MAX_PARAMS)
            return vs_set_error(VS_ERR_INVALID, "vs_generate_plan: layer %d (%s) has nparams = %d (0..%d)", u,
                                m->layers[u].unit.name ? m->layers[u].unit.name : "?", m->layers[u].nparams,
                                VS_LAYER_MAX_PARAMS);
        g->np += m->layers[u].nparams;
    }
    g->units = (vs_pipe_unit*)vs_alloc(NULL, (size_t)g->nu * sizeof *g->units);
    g->gu = (_vs_gp_unit*)vs_alloc(NULL, (size_t)g->nu * sizeof *g->gu);
    g->par = (_vs_gp_param*)vs_alloc(NULL, (size_t)(g->np ? g->np : 1) * sizeof *g->par);
    g->ub = (double*)vs_alloc(NULL, (size_t)g->nu * sizeof *g->ub);
    g->dx = (double*)vs_alloc(NULL, 4 * (size_t)g->nu * sizeof *g->dx);
    if (!g->units || !g->gu || !g->par || !g->ub || !g->dx)
        return vs_set_error(VS_ERR_NOMEM, "vs_generate_plan: out of memory");
    double maxdim = 0, total_flops = 0;
    for (int u = 0, i = 0; u < g->nu; u++) {
        const vs_layer_decl* L = &m->layers[u];
        _vs_gp_unit* x = &g->gu[u];
        memset(x, 0, sizeof *x);
        g->units[u] = L->unit;
        if (!(L->unit.flops >= 0 && L->unit.flops < HUGE_VAL))
            return vs_set_error(VS_ERR_INVALID, "vs_generate_plan: layer %s: flops = %g (a finite count >= 0)",
                                L->unit.name ? L->unit.name : "?", L->unit.flops);
        x->flops = L->unit.flops;
        total_flops += x->flops;
        x->split_bw = L->unit.backward_input && L->unit.backward_weight;
        x->row_bytes = _vs_gp_spec_row_bytes(L->unit.outputs);
        if (x->row_bytes <= 0 && L->unit.outputs && c->msg_bytes_per_row > 0) x->row_bytes = (double)c->msg_bytes_per_row;
        for (int j = 0; j < L->nparams; j++, i++) {
            const vs_param_decl* d = &L->params[j];
            _vs_gp_param* q = &g->par[i];
            vs_dtype dt = d->dtype ? d->dtype : VS_F32;
            if (d->ndim < 0 || d->ndim > VS_TENSOR_MAX_DIMS || !vs_dtype_size(dt))
                return vs_set_error(VS_ERR_INVALID, "vs_generate_plan: parameter %s: ndim %d, dtype %d",
                                    d->name ? d->name : "?", d->ndim, (int)d->dtype);
            q->decl = d, q->unit = u, q->twin = -1, q->shared = 0;
            q->shard_dim = c->policy == VS_TP_MEGATRON ? _vs_gp_shard_dim(d) : -1;
            q->numel = 1;
            for (int k = 0; k < d->ndim; k++) {
                if (d->shape[k] < 1)
                    return vs_set_error(VS_ERR_INVALID, "vs_generate_plan: parameter %s: dim %d is %lld",
                                        d->name ? d->name : "?", k, (long long)d->shape[k]);
                q->numel *= (double)d->shape[k];
                if ((double)d->shape[k] > maxdim) maxdim = (double)d->shape[k];
            }
            q->bytes = q->numel * (double)vs_dtype_size(dt);
            if (q->shard_dim >= 0) x->sharded = 1;
            if (c->policy == VS_TP_MEGATRON) _vs_gp_tp_calls(d, &x->ar_f, &x->ar_b);
            for (int t = 0, k = 0; d->name && t < u && q->twin < 0; t++)
                for (int s = 0; s < m->layers[t].nparams; s++, k++)
                    if (m->layers[t].params[s].name && !strcmp(m->layers[t].params[s].name, d->name))
                        q->twin = t, q->shared = g->par[k].shared = 1;
        }
    }
    if (total_flops <= 0)
        return vs_set_error(VS_ERR_INVALID,
                            "vs_generate_plan: every layer's unit.flops is 0; give each its forward flops per row");
    g->act_row = c->act_bytes_per_row > 0 ? (double)c->act_bytes_per_row : 4 * maxdim;
    return VS_OK;
}

_VS_HL_PRIVATE vs_result _vs_gp_enumerate(_vs_gp* g, int* ntriples)
{
    const vs_constraints* c = g->c;
    int W = c->world;
    vs_result r = VS_OK;
    vs_pipe_plan* pl = (vs_pipe_plan*)vs_alloc(NULL, 2 * sizeof *pl);
    if (!pl) return vs_set_error(VS_ERR_NOMEM, "vs_generate_plan: out of memory");
    *ntriples = 0;
    for (int pp = 1; pp <= W && r == VS_OK; pp++) {
        if (W % pp || (c->pp && pp != c->pp)) continue;
        int have[2] = {0, 0}; // splits for V = 1, 2 at this pp (-1: failed)
        char split_err[2][120];
        for (int tp = 1; tp <= W / pp && r == VS_OK; tp++) {
            if ((W / pp) % tp || (c->tp && tp != c->tp)) continue;
            int dp = W / pp / tp;
            if (c->dp && dp != c->dp) continue;
            ++*ntriples;
            char why[160];
            if (!_vs_gp_mesh_check(g, pp, dp, tp, why, sizeof why)) {
                r = _vs_gp_reject(g, pp, dp, tp, c->microbatches ? c->microbatches : pp, "%s", why);
                continue;
            }
            int64_t rows = c->global_batch / dp;
            int Ms[3] = {pp, 2 * pp, 4 * pp}, nM = 3;
            if (c->microbatches) Ms[0] = c->microbatches, nM = 1;
            for (int i = 0; i < nM && r == VS_OK; i++) {
                int M = Ms[i];
                if (rows % M) {
                    r = _vs_gp_reject(g, pp, dp, tp, M, "%d microbatches do not divide the %lld rows per DP rank", M,
                                      (long long)rows);
                    continue;
                }
                static const vs_pipe_kind kinds[5] = {VS_PIPE_1F1B, VS_PIPE_INTERLEAVED, VS_PIPE_ZBH1, VS_PIPE_ZBV,
                                                      VS_PIPE_GPIPE};
                for (int s = 0; s < (pp == 1 ? 1 : 5) && r == VS_OK; s++) {
                    vs_pipe_kind kind = kinds[s];
                    int V = _vs_pipe_kind_own_chunks(kind);
                    if (V == 2 && g->nu < 2 * pp) continue;
                    if (!have[V - 1]) {
                        vs_pipe_split_desc sd;
                        memset(&sd, 0, sizeof sd);
                        sd.stages = pp, sd.chunks = V, sd.kind = g->split;
                        sd.placement = VS_PIPE_PLACE_LOOP;
                        have[V - 1] = 1;
                        if (vs_pipe_split(g->units, g->nu, &sd, &pl[V - 1]) != VS_OK) {
                            _vs_gp_fmt(split_err[V - 1], sizeof split_err[V - 1], "%s", vs_last_error());
                            vs_clear_error();
                            have[V - 1] = -1;
                        }
                    }
                    if (have[V - 1] < 0) {
                        r = _vs_gp_reject(g, pp, dp, tp, M, "%s", split_err[V - 1]);
                        continue;
                    }
                    /* zbv places its 2 chunks in a V: the same cuts, the chunks' stages
                       zigzag (the split's costs do not depend on placement). */
                    vs_pipe_plan* use = &pl[V - 1];
                    vs_pipe_plan vplan;
                    if (kind == VS_PIPE_ZBV) {
                        vplan = *use;
                        vplan.placement = VS_PIPE_PLACE_V;
                        for (int k = 0; k < vplan.nchunks; k++) vplan.chunk_stage[k] = k < pp ? k : 2 * pp - 1 - k;
                        use = &vplan;
                    }
                    r = _vs_gp_config(g, use, dp, tp, kind, M);
                }
            }
        }
    }
    vs_free(NULL, pl);
    return r;
}

/* No feasible configuration: the resource that is short, and by how much. */
_VS_HL_PRIVATE vs_result _vs_gp_none(const _vs_gp* g, int ntriples)
{
    const vs_constraints* c = g->c;
    char a[32], b[32], d[32], cfg[192];
    if (!ntriples) {
        int f = (c->pp ? c->pp : 1) * (c->dp ? c->dp : 1) * (c->tp ? c->tp : 1);
        if (c->pp && c->dp && c->tp)
            return vs_set_error(VS_ERR_INVALID, "vs_generate_plan: world: the fixed sizes pp=%d x dp=%d x tp=%d make %d ranks, the world has %d",
                                c->pp, c->dp, c->tp, f, c->world);
        return vs_set_error(VS_ERR_INVALID,
                            "vs_generate_plan: world: %d ranks are not PP x DP x TP with the fixed sizes (pp=%d dp=%d tp=%d, 0: free): %d is not a multiple of %d",
                            c->world, c->pp, c->dp, c->tp, c->world, f);
    }
    const _vs_gp_est* small = NULL;
    for (int i = 0; i < g->nest; i++)
        if (g->est[i].kind == 1 && (!small || g->est[i].e.mem_bytes < small->e.mem_bytes)) small = &g->est[i];
    if (small)
        return vs_set_error(VS_ERR_INVALID,
                            "vs_generate_plan: memory: the smallest configuration (%s) needs %s per rank, the limit is %s (%s short)",
                            _vs_gp_fmt_plan(&small->e.plan, cfg, sizeof cfg), _vs_gp_fmt_bytes(small->e.mem_bytes, a, sizeof a),
                            _vs_gp_fmt_bytes(c->mem_limit_bytes, b, sizeof b),
                            _vs_gp_fmt_bytes(small->e.mem_bytes - c->mem_limit_bytes, d, sizeof d));
    return vs_set_error(VS_ERR_INVALID, "vs_generate_plan: no configuration of %d ranks fits the model: %s%s", c->world,
                        g->nest ? g->est[0].e.why : "none enumerated", g->nest > 1 ? " (and the others likewise)" : "");
}

VS_API vs_result vs_generate_plan(const vs_model_desc* m, const vs_constraints* c, const vs_profile* prof,
                                  vs_plan* out, vs_plan_estimate* est, int cap, int* n)
{
    if (!m || !c || !out) return vs_set_error(VS_ERR_NULL, "vs_generate_plan: %s is NULL", !m ? "model" : !c ? "constraints" : "out");
    if (cap > 0 && !est) return vs_set_error(VS_ERR_NULL, "vs_generate_plan: est is NULL with cap %d", cap);
    if (cap < 0) return vs_set_error(VS_ERR_INVALID, "vs_generate_plan: cap %d (>= 0: how many estimates est holds)", cap);
    memset(out, 0, sizeof *out);
    if (n) *n = 0;
    if (!m->layers || m->nlayers < 1)
        return vs_set_error(VS_ERR_INVALID, "vs_generate_plan: the model has %d layers", m->layers ? m->nlayers : 0);
    vs_result rm = vs_model_check(m);
    if (rm) return vs_set_error(rm, "vs_generate_plan: %s", vs_last_error());
    if (c->world < 1) return vs_set_error(VS_ERR_INVALID, "vs_generate_plan: world = %d (required, >= 1)", c->world);
    if (c->sequence_parallel < 0 || c->sequence_parallel > 1)
        return vs_set_error(VS_ERR_INVALID, "vs_generate_plan: sequence_parallel %d (0 or 1)", c->sequence_parallel);
    // (a fixed tp of 1 makes no plan with sequence parallelism)
    if (c->tp != 1) _VS_TRY(_vs_hl_sp_layers(m, c->sequence_parallel, "vs_generate_plan"));
    if (c->pp < 0 || c->dp < 0 || c->tp < 0 || c->microbatches < 0)
        return vs_set_error(VS_ERR_INVALID, "vs_generate_plan: fixed sizes pp=%d dp=%d tp=%d microbatches=%d (>= 0; 0: free)",
                            c->pp, c->dp, c->tp, c->microbatches);
    if (c->global_batch < 1)
        return vs_set_error(VS_ERR_INVALID, "vs_generate_plan: global_batch = %lld rows (required, >= 1)",
                            (long long)c->global_batch);
    if (c->msg_bytes_per_row < 0)
        return vs_set_error(VS_ERR_INVALID, "vs_generate_plan: msg_bytes_per_row = %lld (>= 0)",
                            (long long)c->msg_bytes_per_row);
    if (!(c->mem_limit_bytes >= 0 && c->mem_limit_bytes < HUGE_VAL) || c->act_bytes_per_row < 0)
        return vs_set_error(VS_ERR_INVALID, "vs_generate_plan: mem_limit_bytes = %g, act_bytes_per_row = %lld (>= 0)",
                            c->mem_limit_bytes, (long long)c->act_bytes_per_row);
    if ((int)c->policy < 0 || c->policy > VS_TP_NONE)
        return vs_set_error(VS_ERR_INVALID, "vs_generate_plan: policy %d is not a vs_tp_policy", (int)c->policy);
    if (c->recompute < -1 || c->recompute > 1)
        return vs_set_error(VS_ERR_INVALID, "vs_generate_plan: recompute %d (0: weighed under a memory limit, 1: always, "
                            "-1: never)", c->recompute);
    if (c->zero3 < -1 || c->zero3 > 1)
        return vs_set_error(VS_ERR_INVALID, "vs_generate_plan: zero3 %d (0: weighed under a memory limit, 1: always, -1: "
                            "never)", c->zero3);
    if (c->grad_fp32 < 0 || c->grad_fp32 > 1)
        return vs_set_error(VS_ERR_INVALID, "vs_generate_plan: grad_fp32 %d (0 or 1)", c->grad_fp32);
    if (c->node_ranks < 0 || !(c->inter_bw_bytes_s >= 0 && c->inter_bw_bytes_s < HUGE_VAL))
        return vs_set_error(VS_ERR_INVALID, "vs_generate_plan: node_ranks = %d, inter_bw_bytes_s = %g (>= 0, finite; 0: "
                            "one host, the profile's bw)", c->node_ranks, c->inter_bw_bytes_s);
    vs_pipe_split_kind split = c->split ? c->split : VS_PIPE_SPLIT_FLOPS;
    if (split == VS_PIPE_SPLIT_MANUAL || (int)split < 0 || split > VS_PIPE_SPLIT_TIME)
        return vs_set_error(VS_ERR_INVALID,
                            "vs_generate_plan: split %d: the planner cuts by uniform, parameters, flops or time (a manual split is a plan's, vs_plan_parse)",
                            (int)split);
    _vs_gp g;
    memset(&g, 0, sizeof g);
    g.m = m, g.c = c, g.split = split;
    if (prof) g.prof = *prof;
    const double pv[7] = {g.prof.flop_s, g.prof.bw_bytes_s, g.prof.latency_s, g.prof.p2p_bw_bytes_s, g.prof.call_s,
                          g.prof.instr_s, g.prof.opt_s};
    static const char* const pname[7] = {"flop_s", "bw", "latency", "p2p_bw", "call", "instr", "opt"};
    for (int i = 0; i < 7; i++)
        if (!(pv[i] >= 0 && pv[i] < HUGE_VAL))
            return vs_set_error(VS_ERR_INVALID, "vs_generate_plan: profile %s = %g (finite, >= 0; 0: default)", pname[i],
                                pv[i]);
    for (int i = 0; i < VS_PROFILE_AR_GROUPS; i++) {
        if (g.prof.ar_n[i] < 0)
            return vs_set_error(VS_ERR_INVALID, "vs_generate_plan: profile ar_n[%d] = %d (>= 0; 0: unused)", i, g.prof.ar_n[i]);
        for (int k = 0; k < VS_PROFILE_AR_SIZES; k++)
            if (!(g.prof.ar_s[i][k] >= 0 && g.prof.ar_s[i][k] < HUGE_VAL))
                return vs_set_error(VS_ERR_INVALID, "vs_generate_plan: profile ar_s[%d][%d] = %g (finite, >= 0)", i, k,
                                    g.prof.ar_s[i][k]);
        if (!(fabs(g.prof.tp_s[i]) < HUGE_VAL))
            return vs_set_error(VS_ERR_INVALID, "vs_generate_plan: profile tp_s[%d] = %g (finite)", i, g.prof.tp_s[i]);
    }
    if (!(g.prof.w_share >= 0 && g.prof.w_share < 1))
        return vs_set_error(VS_ERR_INVALID, "vs_generate_plan: profile w_share = %g (in [0, 1); 0: not measured, half)",
                            g.prof.w_share);
    if (g.prof.flop_s == 0) g.prof.flop_s = 1e-10;
    if (g.prof.bw_bytes_s == 0) g.prof.bw_bytes_s = 1e9;
    if (g.prof.latency_s == 0) g.prof.latency_s = 2e-5;
    if (g.prof.p2p_bw_bytes_s == 0) g.prof.p2p_bw_bytes_s = g.prof.bw_bytes_s;
    g.inter_bw = c->inter_bw_bytes_s > 0 ? c->inter_bw_bytes_s : g.prof.bw_bytes_s;
    int ntriples = 0;
    vs_result r = _vs_gp_setup(&g);
    if (r == VS_OK) r = _vs_gp_enumerate(&g, &ntriples);
    for (int i = 0; r == VS_OK && i < g.nest; i++) // a profile's figures so large that the sums overflow
        if (g.est[i].kind != 2 && !(g.est[i].e.step_s < HUGE_VAL && g.est[i].e.mem_bytes < HUGE_VAL)) {
            char pt[1400];
            vs_profile_print(&g.prof, pt, sizeof pt);
            r = vs_set_error(VS_ERR_INVALID, "vs_generate_plan: the estimates overflow (step %g s, memory %g bytes) with the "
                             "profile (defaults filled in) %s", g.est[i].e.step_s, g.est[i].e.mem_bytes, pt);
        }
    if (r == VS_OK) {
        if (g.nest > 1) qsort(g.est, (size_t)g.nest, sizeof *g.est, _vs_gp_cmp);
        int nfeas = 0;
        while (nfeas < g.nest && g.est[nfeas].kind == 0) nfeas++;
        if (nfeas) {
            char a[32], b[32], d[32], e[32];
            _vs_gp_est* best = &g.est[0];
            _vs_gp_fmt(best->e.why, sizeof best->e.why, "chosen; memory: params %s, grads %s, optimizer %s, activations %s",
                     _vs_gp_fmt_bytes(best->e.mem_params, a, sizeof a), _vs_gp_fmt_bytes(best->e.mem_grads, b, sizeof b),
                     _vs_gp_fmt_bytes(best->e.mem_optim, d, sizeof d), _vs_gp_fmt_bytes(best->e.mem_act, e, sizeof e));
            for (int i = 1; i < nfeas; i++) _vs_gp_why_lost(&g.est[i], best);
            *out = best->e.plan;
        } else {
            r = _vs_gp_none(&g, ntriples);
        }
        /* est: the best and the runners-up, then the rejected; when cap is short,
           a quarter of it (at most) is kept for the rejected so the explanation
           can still say why they lost. */
        int ninf = g.nest - nfeas, keep_f = nfeas, keep_i = ninf;
        if (cap < 0) cap = 0;
        if (keep_f + keep_i > cap) {
            keep_i = ninf < cap / 4 ? ninf : cap / 4;
            keep_f = nfeas < cap - keep_i ? nfeas : cap - keep_i;
            keep_i = ninf < cap - keep_f ? ninf : cap - keep_f;
        }
        for (int i = 0; i < keep_f; i++) est[i] = g.est[i].e;
        for (int i = 0; i < keep_i; i++) est[keep_f + i] = g.est[nfeas + i].e;
        if (n) *n = keep_f + keep_i;
    }
    vs_free(NULL, g.units), vs_free(NULL, g.gu), vs_free(NULL, g.par), vs_free(NULL, g.ub), vs_free(NULL, g.dx), vs_free(NULL, g.est);
    return r;
}

/* snprintf-like append */
_VS_HL_PRIVATE void _vs_gp_cat(char* buf, size_t cap, size_t* len, const char* fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(*len < cap ? buf + *len : NULL, *len < cap ? cap - *len : 0, fmt, ap);
    va_end(ap);
    if (k > 0) *len += (size_t)k;
}

_VS_HL_PRIVATE void _vs_gp_explain_one(const vs_plan_estimate* x, const vs_plan_estimate* best, char* buf, size_t cap,
                                       size_t* len)
{
    char t[4][32];
    _vs_gp_cat(buf, cap, len, "  step %s", _vs_gp_fmt_time(x->step_s, t[0], sizeof t[0]));
    if (best && best->step_s > 0) _vs_gp_cat(buf, cap, len, " (%+.1f%%)", 100 * (x->step_s / best->step_s - 1));
    _vs_gp_cat(buf, cap, len, " = compute %s + exposed communication %s + bubble %s (%.0f%%); memory %s per rank\n",
               _vs_gp_fmt_time(x->compute_s, t[1], sizeof t[1]), _vs_gp_fmt_time(x->comm_s, t[2], sizeof t[2]),
               _vs_gp_fmt_time(x->bubble_s, t[3], sizeof t[3]), x->step_s > 0 ? 100 * x->bubble_s / x->step_s : 0.0,
               _vs_gp_fmt_bytes(x->mem_bytes, t[0], sizeof t[0]));
    if (x->mem_params > 0 || x->mem_grads > 0 || x->mem_optim > 0 || x->mem_act > 0)
        _vs_gp_cat(buf, cap, len, "  memory: params %s, grads %s, optimizer %s, activations %s\n",
                   _vs_gp_fmt_bytes(x->mem_params, t[0], sizeof t[0]), _vs_gp_fmt_bytes(x->mem_grads, t[1], sizeof t[1]),
                   _vs_gp_fmt_bytes(x->mem_optim, t[2], sizeof t[2]), _vs_gp_fmt_bytes(x->mem_act, t[3], sizeof t[3]));
}

/* An estimate's why, terminated (a caller's array may hold any bytes), from its
   reason on: "<plan>: <reason>" gives the reason. */
_VS_HL_PRIVATE const char* _vs_gp_reason(const vs_plan_estimate* x, char* w, size_t n)
{
    size_t k = 0;
    while (k < sizeof x->why && k + 1 < n && x->why[k]) w[k] = x->why[k], k++;
    w[k] = 0;
    const char* r = strstr(w, ": ");
    return r ? r + 2 : w;
}

/* "<label>: PP2 x DP2 x TP2, 1f1b, 1 chunk per stage, 4 microbatches, ZeRO-1, split flops" */
_VS_HL_PRIVATE void _vs_gp_explain_head(const char* label, const vs_plan* p, char* buf, size_t cap, size_t* len)
{
    char cfg[192];
    _vs_gp_cat(buf, cap, len, "%s: %s, split %s", label, _vs_gp_fmt_plan(p, cfg, sizeof cfg), _vs_hl_split_name(p));
}

/* est's plan is p (resolved): every field the planner chooses or is given. */
_VS_HL_PRIVATE int _vs_gp_same_plan(const vs_plan* e, const vs_plan* p)
{
    vs_plan x;
    if (vs_plan_resolve(e, &x) != VS_OK) {
        vs_clear_error();
        return 0;
    }
    return x.pp == p->pp && x.dp == p->dp && x.tp == p->tp && x.schedule == p->schedule && x.chunks == p->chunks &&
           x.microbatches == p->microbatches && x.zero == p->zero && x.split == p->split && x.policy == p->policy &&
           (x.sequence_parallel && x.tp > 1) == (p->sequence_parallel && p->tp > 1) &&
           (x.split != VS_PIPE_SPLIT_MANUAL || !strncmp(x.split_points, p->split_points, sizeof x.split_points)) &&
           !strncmp(x.recompute, p->recompute, sizeof x.recompute) && _vs_hl_shard(&x) == _vs_hl_shard(p) &&
           (x.zero != VS_ZERO_3 || (x.reshard_after_forward == p->reshard_after_forward && x.prefetch == p->prefetch));
}

/* The estimate of plan want (resolved) in est, or NULL. */
_VS_HL_PRIVATE const vs_plan_estimate* _vs_gp_find(const vs_plan_estimate* est, int n, const vs_plan* want)
{
    for (int i = 0; i < n; i++)
        if (_vs_gp_same_plan(&est[i].plan, want)) return &est[i];
    return NULL;
}

/* Why the choice shards its parameters (ZeRO-3: the same configuration at
   ZeRO-1 and 2) or keeps its shards within a host (HSDP: the same sharded over
   every DP rank). */
_VS_HL_PRIVATE void _vs_gp_explain_dp(const vs_plan_estimate* best, const vs_plan_estimate* est, int n, char* buf,
                                      size_t cap, size_t* len)
{
    char b0[32], b1[32], w[sizeof best->why + 1];
    vs_plan q;
    if (vs_plan_resolve(&best->plan, &q) != VS_OK) {
        vs_clear_error();
        return;
    }
    const int S = _vs_hl_shard(&q);
    if (q.zero == VS_ZERO_3) {
        const vs_plan_estimate* z[2];
        for (int k = 0; k < 2; k++) {
            vs_plan o = q;
            o.zero = (vs_zero_stage)(k + 1), o.reshard_after_forward = o.prefetch = 0;
            o.reshard_after_forward_set = o.prefetch_set = 0;
            z[k] = _vs_gp_find(est, n, &o);
        }
        if (z[0] && !z[0]->feasible)
            _vs_gp_cat(buf, cap, len, "  it fits only with parameters sharded: ZeRO-1 needs %s a rank%s%s%s\n",
                       _vs_gp_fmt_bytes(z[0]->mem_bytes, b0, sizeof b0), z[1] ? ", ZeRO-2 " : "",
                       z[1] ? _vs_gp_fmt_bytes(z[1]->mem_bytes, b1, sizeof b1) : "",
                       z[1] && z[1]->feasible ? " (slower)" : "");
        else
            _vs_gp_cat(buf, cap, len, "  parameters sharded (ZeRO-3, %s): its gathers run under the compute%s%s\n",
                       q.reshard_after_forward ? "gathered again for the backward" : "kept gathered from the first forward to "
                       "the last backward", z[0] ? "; ZeRO-1: " : "", z[0] ? _vs_gp_reason(z[0], w, sizeof w) : "");
    }
    if (S) {
        vs_plan o = q;
        o.dp_shard = 0;
        const vs_plan_estimate* f = _vs_gp_find(est, n, &o);
        _vs_gp_cat(buf, cap, len, "  HSDP: shards within a host (DPS%d), %d replicas across hosts (DPR%d) all-reduce 1/%d of "
                   "the gradients", S, q.dp / S, q.dp / S, S);
        if (f && f->feasible && best->step_s > 0)
            _vs_gp_cat(buf, cap, len, "; sharded over all %d DP ranks: step %s (%+.1f%%)\n", q.dp,
                       _vs_gp_fmt_time(f->step_s, b0, sizeof b0), 100 * (f->step_s / best->step_s - 1));
        else if (f)
            _vs_gp_cat(buf, cap, len, "; sharded over all %d DP ranks: %s\n", q.dp, _vs_gp_reason(f, w, sizeof w));
        else
            _vs_gp_cat(buf, cap, len, "\n");
    }
}

/* The explanation, of the planner's choice (run NULL) or of the plan that runs
   (first) beside it. Entries shown in full: the best, the run's, two
   runners-up; the others are counted by reason. */
_VS_HL_PRIVATE int _vs_gp_explain(const vs_plan* run, const vs_plan_estimate* est, int n, char* buf, size_t cap)
{
    size_t len = 0;
    char w[sizeof est->why + 1];
    const char* fn = run ? "vs_plan_explain_for" : "vs_plan_explain";
    if (buf && cap) buf[0] = 0;
    if (!buf && cap) return vs_set_error(VS_ERR_NULL, "%s: buf is NULL with cap %zu (NULL only with cap 0)", fn, cap), -1;
    if (n < 0 || (n && !est)) return vs_set_error(n < 0 ? VS_ERR_INVALID : VS_ERR_NULL, "%s: est is %s, n = %d", fn,
                                                  est ? "given" : "NULL", n), -1;
    for (int i = 0; i < n; i++) { // what vs_generate_plan writes: a terminated why, 0 or 1, numbers (inf: rejected)
        const vs_plan_estimate* e = &est[i];
        const double v[5] = {e->step_s, e->compute_s, e->comm_s, e->bubble_s, e->mem_bytes};
        static const char* const vn[5] = {"step_s", "compute_s", "comm_s", "bubble_s", "mem_bytes"};
        if (!memchr(e->why, 0, sizeof e->why))
            return vs_set_error(VS_ERR_INVALID, "%s: est[%d].why is not terminated within its %zu bytes", fn, i,
                                sizeof e->why), -1;
        if (e->feasible != 0 && e->feasible != 1)
            return vs_set_error(VS_ERR_INVALID, "%s: est[%d].feasible = %d (0 or 1)", fn, i, e->feasible), -1;
        for (int k = 0; k < 5; k++)
            if (v[k] != v[k] || (e->feasible && !(fabs(v[k]) < HUGE_VAL)))
                return vs_set_error(VS_ERR_INVALID, "%s: est[%d].%s = %g (a number; finite when feasible)", fn, i, vn[k],
                                    v[k]), -1;
    }
    vs_plan rp;
    if (run && vs_plan_resolve(run, &rp) != VS_OK) return -1;
    if (!est || n <= 0) {
        if (run) {
            _vs_gp_explain_head("plan", &rp, buf, cap, &len);
            _vs_gp_cat(buf, cap, &len, ": no estimates to compare it with\n");
        } else {
            _vs_gp_cat(buf, cap, &len, "no configurations\n");
        }
        return len > (size_t)INT_MAX ? INT_MAX : (int)len;
    }
    int nfeas = 0;
    while (nfeas < n && est[nfeas].feasible) nfeas++;
    const vs_plan_estimate* best = nfeas ? &est[0] : NULL;
    int j = -1; // the run's estimate
    for (int i = 0; run && i < n && j < 0; i++)
        if (_vs_gp_same_plan(&est[i].plan, &rp)) j = i;
    for (int i = 0; run && i < n && j < 0; i++) // its mesh or microbatch count rejected whole (one entry for all)
        if (!est[i].feasible && !(est[i].step_s < HUGE_VAL) && est[i].plan.pp == rp.pp && est[i].plan.dp == rp.dp &&
            est[i].plan.tp == rp.tp && est[i].plan.microbatches == rp.microbatches)
            j = i;
    if (run) {
        _vs_gp_explain_head("plan", &rp, buf, cap, &len);
        if (j == 0 && best) {
            _vs_gp_cat(buf, cap, &len, ": the planner's choice\n");
            _vs_gp_explain_one(best, NULL, buf, cap, &len);
        } else if (j > 0 && est[j].feasible) {
            _vs_gp_cat(buf, cap, &len, "\n");
            _vs_gp_explain_one(&est[j], best, buf, cap, &len);
            _vs_gp_cat(buf, cap, &len, "  why it is not the planner's choice: %s\n", _vs_gp_reason(&est[j], w, sizeof w));
        } else if (j >= 0) {
            _vs_gp_cat(buf, cap, &len, ": infeasible to the planner: %s\n", _vs_gp_reason(&est[j], w, sizeof w));
        } else {
            _vs_gp_cat(buf, cap, &len,
                       ": not among the %d configurations estimated (the planner tries 1f1b, gpipe, zbh1 at 1 chunk per "
                       "stage, interleaved and zbv at 2, ZeRO 0 to 2 (3 with prefetch 1 as vs_constraints.zero3 says), HSDP where DP "
                       "spans hosts, the split its "
                       "constraints give)\n",
                       n);
        }
        if (run->nrules > 0)
            _vs_gp_cat(buf, cap, &len, "  (its %d shard rule%s are not in the cost model, which shards by the roles)\n",
                       run->nrules, run->nrules == 1 ? "" : "s");
    }
    if (best && !(run && j == 0)) {
        _vs_gp_explain_head(run ? "the planner's choice" : "chosen", &best->plan, buf, cap, &len);
        _vs_gp_cat(buf, cap, &len, "\n");
        _vs_gp_explain_one(best, NULL, buf, cap, &len);
    }
    if (best && best->plan.recompute[0]) { // why it recomputes: what memory the same plan needs without
        vs_plan no = best->plan;
        no.recompute[0] = 0;
        int fits = 0, k = -1;
        for (int i = 0; i < n; i++) {
            fits |= est[i].feasible && !est[i].plan.recompute[0];
            if (k < 0 && _vs_gp_same_plan(&est[i].plan, &no)) k = i;
        }
        char b0[32];
        if (k >= 0 && !est[k].feasible)
            _vs_gp_cat(buf, cap, &len, "  it fits only with recompute: without, the same configuration needs %s a rank "
                       "(%s)\n", _vs_gp_fmt_bytes(est[k].mem_bytes, b0, sizeof b0),
                       fits ? "the configurations that fit without it are slower"
                            : "no configuration fits without recompute");
        else
            _vs_gp_cat(buf, cap, &len, "  it recomputes every layer's activations (vs_constraints.recompute)\n");
    }
    if (best && (best->plan.zero == VS_ZERO_3 || _vs_hl_shard(&best->plan)))
        _vs_gp_explain_dp(best, est, n, buf, cap, &len);
    if (!best) {
        _vs_gp_cat(buf, cap, &len, "no configuration is feasible\n");
    }
    int ru[2] = {-1, -1}, nru = 0;
    for (int i = 1; i < nfeas && nru < 2; i++) {
        if (i == j) continue;
        char label[32];
        ru[nru++] = i;
        snprintf(label, sizeof label, "runner-up %d", nru);
        _vs_gp_explain_head(label, &est[i].plan, buf, cap, &len);
        _vs_gp_cat(buf, cap, &len, "\n");
        _vs_gp_explain_one(&est[i], best, buf, cap, &len);
        _vs_gp_cat(buf, cap, &len, "  why it lost: %s\n", _vs_gp_reason(&est[i], w, sizeof w));
    }
    /* The others, grouped by reason (the phrase each why is made with). */
    static const char* const key[] = {"bubble", "exposed communication", "compute", "as fast as",
                                      "exceeds memory", "does not divide", "more stages", "policy is none",
                                      "microbatches do not divide", NULL};
    static const char* const label[] = {"slower: larger bubble", "slower: more exposed communication",
                                        "slower: more compute per rank", "as fast as the best", "over the memory limit",
                                        "TP or DP size does not divide the model or batch", "more stages than layers",
                                        "TP without a TP policy", "microbatch count does not divide the batch",
                                        "other"};
    int nrest = 0;
    for (int i = 0; i < n; i++) nrest += !((best && i == 0) || i == j || i == ru[0] || i == ru[1]);
    if (!nrest) return len > (size_t)INT_MAX ? INT_MAX : (int)len;
    _vs_gp_cat(buf, cap, &len, "rejected: %d configuration%s\n", nrest, nrest == 1 ? "" : "s");
    for (int g = 0; g < 10; g++) {
        int cnt = 0, ex = -1;
        for (int i = 0; i < n; i++) {
            if ((best && i == 0) || i == j || i == ru[0] || i == ru[1]) continue;
            const char* rs = _vs_gp_reason(&est[i], w, sizeof w); // (the reason alone: a plan's ", recompute" is no "compute")
            int k = 0;
            while (key[k] && !strstr(rs, key[k])) k++;
            if (k == g) {
                if (ex < 0) ex = i;
                cnt++;
            }
        }
        if (cnt) {
            _vs_gp_reason(&est[ex], w, sizeof w);
            _vs_gp_cat(buf, cap, &len, "  %s (%d), e.g. %s\n", label[g], cnt, w);
        }
    }
    return len > (size_t)INT_MAX ? INT_MAX : (int)len;
}

VS_API int vs_plan_explain(const vs_plan_estimate* est, int n, char* buf, size_t cap)
{
    return _vs_gp_explain(NULL, est, n, buf, cap);
}

VS_API int vs_plan_explain_for(const vs_plan* p, const vs_plan_estimate* est, int n, char* buf, size_t cap)
{
    return _vs_gp_explain(p, est, n, buf, cap);
}

/* The profile. Every rank gets the same figures, so every rank plans alike.
   - Layer times: every rank at once (as a job's ranks compute side by side: on
     a machine whose ranks share cores, that is what each gets), the model runs
     one microbatch through the pipe engine on a 1-rank mesh of its own (the
     layers' callbacks wrapped to time each call), after one run to warm up;
     flop_s matches the cost model's backward = 2 x forward (see the fit
     below). Rows: the data callback's first dim.
   - The fixed costs: over 4 runs after the warm-up, each layer's callback time
     is fitted as call_s x calls + flop_s x 3 x flops x rows (weighted by
     1/time, so that small layers tell the constant); instr_s = what the runs'
     wall time less the callbacks' grows by per compute instruction (F and BW:
     2 a microbatch), runs of 3 microbatches against runs of 1.
   - The optimizer: _vs_gp_prof_opt. These are averaged over the ranks.
   - The transports: the all-reduce table (_vs_gp_prof_ar), bw and latency from
     its world-size row, p2p from a ping-pong.
   - Then tp_s: the layers again for each group size n of the table, on a PP1 x
     DP x TPn mesh of the world, sharded as the megatron policy says (a model
     whose shapes TP n does not divide gets none for n). */
typedef struct _vs_gp_prof_unit {
    vs_pipe_fn f, b, bi, bw;
    vs_layer_ctx ctx;
    double t;   // seconds in its callbacks, this run
    double tbw[2]; // of which in backward_input and in backward_weight (w_share)
    int calls;  // callback calls, this run
    double out_bytes; // its first output's bytes
    int ar_f, ar_b;   // TP > 1: its TP all-reduces (_vs_gp_tp_calls)
    int sharded;      // TP > 1: it holds a sharded parameter
} _vs_gp_prof_unit;

typedef struct _vs_gp_prof_data {
    vs_pipe_fn fn;
    void* user;
    int64_t rows;
} _vs_gp_prof_data;

_VS_HL_PRIVATE double _vs_gp_tensor_bytes(const vs_pipe_tensor* t)
{
    double b = (double)vs_dtype_size(t->dtype);
    for (int k = 0; k < t->ndim; k++) b *= (double)t->shape[k];
    return b;
}

#define _VS_GP_WRAP(name, field, fwd, part)                               \
    _VS_HL_PRIVATE vs_result name(vs_pipe_call* c)                        \
    {                                                                     \
        _vs_gp_prof_unit* u = (_vs_gp_prof_unit*)c->user;                 \
        c->user = &u->ctx;                                                \
        double t0 = _vs_now();                                            \
        vs_result r = u->field(c);                                        \
        double dt = _vs_now() - t0;                                       \
        u->t += dt;                                                       \
        if (part >= 0) u->tbw[part] += dt;                                \
        u->calls++;                                                       \
        if (fwd && c->n_out > 0) u->out_bytes = _vs_gp_tensor_bytes(c->out); \
        c->user = u;                                                      \
        return r;                                                         \
    }
_VS_GP_WRAP(_vs_gp_prof_f, f, 1, -1)
_VS_GP_WRAP(_vs_gp_prof_b, b, 0, -1)
_VS_GP_WRAP(_vs_gp_prof_bi, bi, 0, 0)
_VS_GP_WRAP(_vs_gp_prof_bw, bw, 0, 1)
#undef _VS_GP_WRAP

_VS_HL_PRIVATE vs_result _vs_gp_prof_data_fn(vs_pipe_call* c)
{
    _vs_gp_prof_data* d = (_vs_gp_prof_data*)c->user;
    c->user = d->user;
    vs_result r = d->fn(c);
    c->user = d;
    for (int i = 0; r == VS_OK && i < c->n_out; i++)
        if (c->out[i].ndim > 0 && c->out[i].shape[0] > d->rows) d->rows = c->out[i].shape[0];
    return r;
}

_VS_HL_PRIVATE int _vs_gp_dcmp(const void* a, const void* b)
{
    double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}

/* Fits t_u = a calls_u + b x_u over the units (x_u: flop-seconds' worth of
   work), each weighted by 1/t_u (relative errors, so the small units that tell
   the constant count); a <= 0 or b <= 0: a = 0, b = sum t / sum x. */
_VS_HL_PRIVATE void _vs_gp_fit(const double* t, const double* c, const double* x, int n, double* a, double* b)
{
    double scc = 0, scx = 0, sxx = 0, sct = 0, sxt = 0, st = 0, sx = 0;
    for (int i = 0; i < n; i++) {
        st += t[i], sx += x[i];
        if (!(t[i] > 0)) continue;
        double w = 1 / (t[i] * t[i]);
        scc += w * c[i] * c[i], scx += w * c[i] * x[i], sxx += w * x[i] * x[i];
        sct += w * c[i] * t[i], sxt += w * x[i] * t[i];
    }
    double det = scc * sxx - scx * scx;
    *a = 0, *b = sx > 0 ? st / sx : 0;
    if (det > 1e-12 * scc * sxx && det > 0) {
        double aa = (sct * sxx - scx * sxt) / det, bb = (scc * sxt - scx * sct) / det;
        if (aa > 0 && bb > 0) *a = aa, *b = bb;
    }
}

/* One TP run's figure for tp_s: what the layers took (pu[].t, pu[].calls) beyond
   what pf has for them (compute as flop_s / tp on sharded layers and call_s
   say; each TP collective its table time), per byte those collectives move
   (each layer's forward output, its input backward: the previous layer's
   output; 0 when they move none). */
_VS_HL_PRIVATE double _vs_gp_tp_resid(const vs_model_desc* m, const _vs_gp_prof_unit* pu, int tp, const vs_profile* pf,
                                      double rows)
{
    double extra = 0, nbytes = 0;
    for (int u = 0; u < m->nlayers; u++) {
        const _vs_gp_prof_unit* x = &pu[u];
        double ob = x->out_bytes, ib = u > 0 ? pu[u - 1].out_bytes : ob;
        extra += x->t - 3 * m->layers[u].unit.flops * rows * pf->flop_s / (x->sharded ? tp : 1) - x->calls * pf->call_s -
                 (x->ar_f * _vs_gp_allreduce(pf, tp, ob) + x->ar_b * _vs_gp_allreduce(pf, tp, ib));
        nbytes += x->ar_f * ob + x->ar_b * ib;
    }
    return nbytes > 0 ? extra / nbytes : 0;
}

/* _vs_gp_prof_layers' units: each layer's callbacks wrapped to time them
   (pu[u]), its parameters this rank's shard (tp > 1: the megatron policy's)
   of small finite values, a tied one a single buffer; *flops: the layers'
   forward flops per row. */
_VS_HL_PRIVATE vs_result _vs_gp_prof_units(vs_world* w, const vs_model_desc* m, int tp, vs_mesh* tpm,
                                           _vs_gp_prof_unit* pu, vs_pipe_unit* units, double* flops)
{
    vs_plan tplan; // megatron along TP
    memset(&tplan, 0, sizeof tplan);
    tplan.tp = tp, tplan.policy = VS_TP_MEGATRON;
    vs_result r = VS_OK;
    for (int u = 0; u < m->nlayers && r == VS_OK; u++) {
        const vs_layer_decl* L = &m->layers[u];
        _vs_gp_prof_unit* x = &pu[u];
        *flops += L->unit.flops;
        units[u] = L->unit;
        units[u].user = x;
        x->f = L->unit.forward, x->b = L->unit.backward, x->bi = L->unit.backward_input, x->bw = L->unit.backward_weight;
        units[u].forward = x->f ? _vs_gp_prof_f : NULL;
        /* at TP 1 a unit with both split parts runs them (the engine's BW calls
           B then W when there is no full backward), timed apart: w_share */
        units[u].backward = x->b && !(tp == 1 && x->bi && x->bw) ? _vs_gp_prof_b : NULL;
        units[u].backward_input = x->bi ? _vs_gp_prof_bi : NULL;
        units[u].backward_weight = x->bw ? _vs_gp_prof_bw : NULL;
        x->ctx.user = L->user;
        x->ctx.tp = tpm;
        x->ctx.tp_size = tp;
        x->ctx.tp_rank = tpm ? vs_mesh_rank(tpm) : 0;
        for (int j = 0; j < L->nparams; j++) {
            const vs_param_decl* d = &L->params[j];
            vs_dtype dt = d->dtype ? d->dtype : VS_F32;
            vs_placement place = vs_replicate();
            if (tp > 1 && (r = vs_plan_placement(&tplan, d, &place, NULL)) != VS_OK) break;
            if (tp > 1) {
                x->sharded |= place.kind == VS_PLACE_SHARD;
                _vs_gp_tp_calls(d, &x->ar_f, &x->ar_b);
            }
            size_t numel = 1;
            for (int k = 0; k < d->ndim; k++) {
                int64_t n = d->shape[k] > 0 ? d->shape[k] : 1;
                if (place.kind == VS_PLACE_SHARD && place.dim == k)
                    n /= tp, x->ctx.offset[j][k] = n * x->ctx.tp_rank;
                numel *= (size_t)n, x->ctx.local_shape[j][k] = n;
            }
            for (int t = 0; t < u && !x->ctx.param[j]; t++) // a tied parameter: one buffer
                for (int s = 0; s < m->layers[t].nparams; s++)
                    if (d->name && m->layers[t].params[s].name && !strcmp(d->name, m->layers[t].params[s].name)) {
                        x->ctx.param[j] = pu[t].ctx.param[s], x->ctx.grad[j] = pu[t].ctx.grad[s];
                        break;
                    }
            if (x->ctx.param[j]) continue;
            size_t bytes = numel * vs_dtype_size(dt);
            x->ctx.param[j] = vs_alloc(w, bytes ? bytes : 1);
            x->ctx.grad[j] = vs_alloc(w, bytes ? bytes : 1);
            if (!x->ctx.param[j] || !x->ctx.grad[j]) {
                r = vs_set_error(VS_ERR_NOMEM, "vs_profile_measure: out of memory for %s", d->name ? d->name : "?");
                break;
            }
            memset(x->ctx.grad[j], 0, bytes);
            memset(x->ctx.param[j], 0, bytes);
            /* Timing needs finite values, not the model's: small ones (ones for a
               ONES or CONSTANT init, so norm gains stay sane). */
            for (size_t e = 0; e < numel && (dt == VS_F32 || dt == VS_F64); e++) {
                double v = d->init.kind == VS_INIT_ONES ? 1 : d->init.kind == VS_INIT_CONSTANT ? d->init.a
                           : d->init.kind == VS_INIT_ZEROS ? 0 : 0.02 * sin(0.7 * (double)e + (double)j);
                if (dt == VS_F32) ((float*)x->ctx.param[j])[e] = (float)v;
                else ((double*)x->ctx.param[j])[e] = v;
            }
        }
    }
    return r;
}

/* _vs_gp_prof_layers' runs and fit on the pipeline over the units (see there
   for out[]). One run to warm up, then 4 (the sums); tp > 1: 8, each its own
   figure. The engine's time: the runs' wall time less their callbacks'. Its
   part that grows with the instructions (F, BW on one stage: 2 a microbatch)
   is what runs of 3 microbatches take more than runs of 1 (medians), per
   instruction; the rest is paid once a run (the schedule's setup, the loss)
   and is not charged per microbatch. */
_VS_HL_PRIVATE vs_result _vs_gp_prof_time(vs_world* w, const vs_model_desc* m, vs_pipe* pipe, _vs_gp_prof_unit* pu,
                                          const _vs_gp_prof_data* dd, int tp, const vs_profile* pf, double flops,
                                          double* fit, double* out)
{
    int nu = m->nlayers;
    vs_pipe_sched* sched = NULL;
    vs_result r = vs_pipe_generate(w, VS_PIPE_1F1B, 1, 1, 1, &sched);
    double wall = 0, xs[8] = {0, 0, 0, 0, 0, 0, 0, 0}; // xs: tp > 1, each run's figure
    double sbw[2] = {0, 0}; // tp 1: the split units' B and W time, over the timed runs of 1 microbatch
    double *ft = fit, *fc = fit + nu, *fx = fit + 2 * nu; // fit's parts, per unit: time, calls, flop-seconds' work
    memset(fit, 0, (size_t)nu * 3 * sizeof *fit);
    double rest[2][4];
    for (int pass = 0; pass < (tp == 1 ? 2 : 1) && r == VS_OK; pass++) {
        if (pass == 1) {
            vs_pipe_sched_free(sched);
            sched = NULL;
            if ((r = vs_pipe_generate(w, VS_PIPE_1F1B, 1, 1, 3, &sched)) != VS_OK) break;
        }
        for (int it = 0; it < (tp == 1 ? 5 : 9) && r == VS_OK; it++) {
            for (int u = 0; u < nu; u++) pu[u].t = pu[u].tbw[0] = pu[u].tbw[1] = 0, pu[u].calls = 0;
            double t0 = _vs_now();
            r = vs_pipe_run(pipe, sched, NULL);
            double t1 = _vs_now() - t0;
            for (int u = 0; it > 0 && u < nu; u++) {
                if (pass == 0) ft[u] += pu[u].t, fc[u] += pu[u].calls, sbw[0] += pu[u].tbw[0], sbw[1] += pu[u].tbw[1];
                t1 -= pu[u].t;
            }
            if (it > 0 && tp == 1) rest[pass][it - 1] = t1;
            if (it > 0 && tp > 1 && r == VS_OK) xs[it - 1] = _vs_gp_tp_resid(m, pu, tp, pf, (double)dd->rows);
        }
        if (r == VS_OK && tp == 1) qsort(rest[pass], 4, sizeof(double), _vs_gp_dcmp);
    }
    vs_pipe_sched_free(sched);
    if (r == VS_OK && tp == 1) {
        double d = (rest[1][1] + rest[1][2] - rest[0][1] - rest[0][2]) / 2; // medians
        wall = d > 0 ? d / 4 : 0; // (3 - 1) x 2 instructions more
    }
    if (r != VS_OK) return r;
    double rows = (double)(dd->rows > 0 ? dd->rows : 1);
    if (!(flops * rows > 0)) r = vs_set_error(VS_ERR_INVALID, "vs_profile_measure: the model's layers have no flops (unit.flops: forward flops per row)");
    for (int u = 0; u < nu; u++) fx[u] = 4 * 3 * m->layers[u].unit.flops * rows; // 4 runs of F + 2F
    if (r == VS_OK && tp == 1) {
        _vs_gp_fit(ft, fc, fx, nu, &out[1], &out[0]);
        out[2] = wall;
        out[3] = sbw[0] + sbw[1] > 0 ? sbw[1] / (sbw[0] + sbw[1]) : 0;
    } else if (r == VS_OK) {
        qsort(xs, 8, sizeof(double), _vs_gp_dcmp);
        out[0] = (xs[3] + xs[4]) / 2; // the median run
    }
    return r;
}

/* This rank's layer times.
   - tp 1: on a 1-rank mesh over `comm` (the rank's own), fitted as time per
     forward flop of one row (out[0]), per callback call (out[1]) and the
     engine's per compute instruction (out[2]); out[3]: the split units' W
     time over their B + W (0: none split)
   - tp > 1: on a PP1 x DP x TP mesh over `comm` (the world's), the parameters
     sharded by the megatron policy, the TP groups all running at once; out[0]
     = the layers' time beyond what pf's compute (flop_s / tp on sharded
     layers, call_s) and its all-reduce table give their TP collectives, per
     byte those move (tp_s: _vs_gp_tp_resid, the median of 8 runs after a
     warm-up) */
_VS_HL_PRIVATE vs_result _vs_gp_prof_layers(vs_world* w, vs_comm* comm, const vs_model_desc* m, vs_pipe_fn data,
                                            void* data_user, int tp, const vs_profile* pf, double* out)
{
    int nu = m->nlayers;
    vs_result r = VS_OK;
    vs_mesh* mesh = NULL;
    vs_mesh* tpm = NULL;
    vs_pipe* pipe = NULL;
    vs_pipe_plan plan;
    vs_pipe_desc pd;
    vs_mesh_desc md;
    _vs_gp_prof_data dd;
    double flops = 0;
    _vs_gp_prof_unit* pu = (_vs_gp_prof_unit*)vs_alloc(w, (size_t)nu * sizeof *pu);
    vs_pipe_unit* units = (vs_pipe_unit*)vs_alloc(w, (size_t)nu * sizeof *units);
    double* fit = (double*)vs_alloc(w, (size_t)nu * 3 * sizeof *fit);
    if (!pu || !units || !fit) r = vs_set_error(VS_ERR_NOMEM, "vs_profile_measure: out of memory");
    else memset(pu, 0, (size_t)nu * sizeof *pu);
    memset(&md, 0, sizeof md);
    if (tp > 1) {
        md.shape[0] = 1, md.shape[1] = vs_comm_size(comm) / tp, md.shape[2] = tp;
        md.dim_names[0] = "PP", md.dim_names[1] = "DP", md.dim_names[2] = "TP";
    } else {
        md.shape[0] = 1, md.dim_names[0] = "PP";
    }
    md.comm = comm;
    if (r == VS_OK) r = vs_mesh_init(w, &md, &mesh);
    if (r == VS_OK && tp > 1) r = vs_mesh_submesh(mesh, "TP", &tpm);
    if (r == VS_OK) r = _vs_gp_prof_units(w, m, tp, tpm, pu, units, &flops);
    if (tp > 1) { // the layers' collectives need every rank: all set up, or none runs
        int ok = r == VS_OK, all = 0;
        vs_result ra = vs_all_reduce(comm, &ok, &all, 1, VS_I32, VS_OP_MIN, NULL);
        if (r == VS_OK && ra != VS_OK) r = ra;
        if (r == VS_OK && !all)
            r = vs_set_error(VS_ERR_INVALID, "vs_profile_measure: another rank failed to set up the TP%d layers", tp);
    }
    if (r != VS_OK) goto done;
    memset(&pd, 0, sizeof pd);
    dd.fn = data, dd.user = data_user, dd.rows = 0;
    {
        vs_pipe_split_desc sd;
        memset(&sd, 0, sizeof sd);
        sd.stages = 1, sd.kind = VS_PIPE_SPLIT_UNIFORM;
        if ((r = vs_pipe_split(units, nu, &sd, &plan)) != VS_OK) goto done;
    }
    pd.mesh = mesh, pd.units = units, pd.nunits = nu, pd.plan = &plan, pd.data = _vs_gp_prof_data_fn, pd.data_user = &dd;
    if ((r = vs_pipe_init(&pd, &pipe)) != VS_OK) goto done;
    r = _vs_gp_prof_time(w, m, pipe, pu, &dd, tp, pf, flops, fit, out);
done:
    if (pipe) vs_pipe_free(pipe);
    if (mesh) vs_mesh_free(mesh);
    for (int u = 0; pu && units && u < nu; u++)
        for (int j = 0; j < m->layers[u].nparams; j++) {
            int tied = 0;
            for (int t = 0; t < u && !tied; t++)
                for (int s = 0; s < m->layers[t].nparams; s++)
                    if (pu[u].ctx.param[j] && pu[t].ctx.param[s] == pu[u].ctx.param[j]) tied = 1;
            if (!tied) vs_free(w, pu[u].ctx.param[j]), vs_free(w, pu[u].ctx.grad[j]);
        }
    vs_free(w, pu);
    vs_free(w, units);
    vs_free(w, fit);
    return r;
}

/* The optimizer's step per element: a one-rank DDP on `solo` holding one f32
   parameter of 2^18 elements, AdamW, its vs_ddp_step timed (median of 5 after a
   warm-up) while every rank of the world does the same. The host never touches
   the DDP's buffers (device memory on NCCL, where what is timed is the step's
   enqueueing, not its kernels). */
_VS_HL_PRIVATE vs_result _vs_gp_prof_opt(vs_world* w, vs_comm* solo, double* out)
{
    vs_mesh* mesh = NULL;
    vs_ddp* d = NULL;
    vs_mesh_desc md;
    vs_ddp_desc dd;
    vs_ddp_param_desc pd;
    const int64_t N = (int64_t)1 << 18;
    double t[6];
    memset(&md, 0, sizeof md);
    md.shape[0] = 1, md.dim_names[0] = "DP", md.comm = solo;
    memset(&dd, 0, sizeof dd);
    memset(&pd, 0, sizeof pd);
    pd.name = "profile.opt", pd.dtype = VS_F32, pd.ndim = 1, pd.shape[0] = N;
    vs_result r = vs_mesh_init(w, &md, &mesh);
    if (r == VS_OK) dd.mesh = mesh, dd.optim.kind = VS_OPTIM_ADAMW, r = vs_ddp_init(&dd, &d);
    if (r == VS_OK) r = vs_ddp_add_param(d, &pd, NULL);
    if (r == VS_OK) r = vs_ddp_finalize(d);
    for (int i = 0; i < 6 && r == VS_OK; i++) { // (zero gradients: AdamW does the same work on every element)
        r = vs_ddp_grad_ready(d, 0);
        if (r == VS_OK) r = vs_ddp_finish_grad_sync(d);
        double t0 = _vs_now();
        if (r == VS_OK) r = vs_ddp_step(d, 1e-3);
        t[i] = _vs_now() - t0;
        if (r == VS_OK) r = vs_ddp_zero_grad(d);
    }
    if (r == VS_OK) {
        qsort(t + 1, 5, sizeof(double), _vs_gp_dcmp);
        *out = t[3] / (double)N;
    }
    if (d) vs_ddp_free(d);
    if (mesh) vs_mesh_free(mesh);
    return r;
}

/* The all-reduce table: group sizes n (divisors of the world above 1, smallest
   first; past VS_PROFILE_AR_GROUPS the smallest ones and the world), each rank
   in group rank / n; per size a warm-up then 5 calls, each after a barrier of the
   world (so that all groups run at once, as a mesh's TP or DP groups do) and a
   0.5 ms idle wait, so that the ranks arrive as they do from a device's compute
   rather than straight out of the barrier (on thread ranks sharing cores that
   wake-up is part of what a layer's all-reduce costs: bench/RESULTS.md); the
   median, averaged over the ranks. */
_VS_HL_PRIVATE vs_result _vs_gp_prof_ar(vs_comm* wc, int rank, int size, float* buf, vs_profile* p)
{
    int ns[VS_PROFILE_AR_GROUPS], nn = 0;
    for (int n = 2; n <= size; n++) {
        if (size % n) continue;
        if (nn == VS_PROFILE_AR_GROUPS) nn--; // the last slot keeps the world's size
        ns[nn++] = n;
    }
    vs_result r = VS_OK;
    for (int g = 0; g < nn && r == VS_OK; g++) {
        vs_comm* gc = NULL;
        if ((r = vs_comm_split(wc, rank / ns[g], rank, &gc)) != VS_OK) break;
        p->ar_n[g] = ns[g];
        for (int k = 0; k < VS_PROFILE_AR_SIZES && r == VS_OK; k++) {
            double t[6];
            size_t count = (size_t)(_vs_gp_ar_bytes[k] / sizeof(float));
            for (int i = 0; i < 6 && r == VS_OK; i++) {
                r = vs_barrier(wc, NULL);
                _vs_sleep_us(500);
                double t0 = _vs_now();
                if (r == VS_OK) r = vs_all_reduce(gc, buf, buf, count, VS_F32, VS_OP_SUM, NULL);
                t[i] = _vs_now() - t0;
            }
            if (r != VS_OK) break;
            qsort(t + 1, 5, sizeof(double), _vs_gp_dcmp);
            p->ar_s[g][k] = t[3];
        }
        vs_comm_free(gc);
    }
    if (r == VS_OK) r = vs_all_reduce(wc, p->ar_s, p->ar_s, (size_t)VS_PROFILE_AR_GROUPS * VS_PROFILE_AR_SIZES,
                                      VS_F64, VS_OP_SUM, NULL);
    for (int g = 0; g < VS_PROFILE_AR_GROUPS; g++)
        for (int k = 0; k < VS_PROFILE_AR_SIZES; k++) p->ar_s[g][k] /= size;
    return r;
}

VS_API vs_result vs_profile_measure(vs_world* w, const vs_model_desc* m, vs_pipe_fn data, void* data_user,
                                    vs_profile* out)
{
    if (!w || !m || !out || !data)
        return vs_set_error(VS_ERR_NULL, "vs_profile_measure: %s is NULL%s", !w ? "world" : !m ? "model" : !out ? "out" : "data",
                            w && m && out ? " (the data callback gives the layers their data inputs)" : "");
    if (!m->layers || m->nlayers < 1) return vs_set_error(VS_ERR_INVALID, "vs_profile_measure: the model has no layers");
    vs_result rm = vs_model_check(m);
    if (rm) return vs_set_error(rm, "vs_profile_measure: %s", vs_last_error());
    memset(out, 0, sizeof *out);
    vs_comm* wc = vs_world_comm(w);
    int rank = vs_world_rank(w), size = vs_world_size(w);
    vs_comm* solo = NULL;
    vs_profile p;
    memset(&p, 0, sizeof p);
    vs_result r = vs_comm_split(wc, rank, 0, &solo);
    double v[6] = {0, 0, 0, 0, 0, 0}; // flop_s, call_s, instr_s, opt_s, w_share; p2p
    char msg0[256] = "";
    if (r != VS_OK) return r;
    {
        double l3[4] = {0, 0, 0, 0}, o = 0;
        vs_result rl = _vs_gp_prof_layers(w, solo, m, data, data_user, 1, NULL, l3);
        if (rl == VS_OK) rl = _vs_gp_prof_opt(w, solo, &o);
        v[0] = l3[0], v[1] = l3[1], v[2] = l3[2], v[3] = o, v[4] = l3[3];
        if (rl != VS_OK) _vs_gp_fmt(msg0, sizeof msg0, "%s", vs_last_error());
        double f = rl != VS_OK ? (double)(rank + 1) : (double)(size + 1), first = 0;
        vs_comm_free(solo);
        // every rank learns whether one failed, and the first one that did
        if ((r = vs_all_reduce(wc, &f, &first, 1, VS_F64, VS_OP_MIN, NULL)) != VS_OK) return r;
        if (first <= size) {
            if (rl != VS_OK) return vs_set_error(rl, "vs_profile_measure: timing the layers: %s", msg0);
            return vs_set_error(VS_ERR_INVALID, "vs_profile_measure: timing the layers failed on rank %d (see its error)",
                                (int)first - 1);
        }
    }
    // the mean over the ranks: each ran its own layers alongside the others
    if ((r = vs_all_reduce(wc, v, v, 5, VS_F64, VS_OP_SUM, NULL)) != VS_OK) return r;
    p.flop_s = v[0] / size, p.call_s = v[1] / size, p.instr_s = v[2] / size, p.opt_s = v[3] / size;
    p.w_share = v[4] / size < 1 ? v[4] / size : 0; // (a W that took all of it: not a share the planner can use)
    const size_t N = (size_t)1 << 20; // 4 MiB of f32
    float* buf = (float*)vs_alloc(w, N * sizeof(float));
    int ok = buf != NULL, all = 0;
    if ((r = vs_all_reduce(wc, &ok, &all, 1, VS_I32, VS_OP_MIN, NULL)) != VS_OK) goto done;
    if (!all) {
        r = vs_set_error(VS_ERR_NOMEM, "vs_profile_measure: out of memory for the 4 MiB bandwidth buffer");
        goto done;
    }
    memset(buf, 0, N * sizeof(float));
    if (size > 1 && (r = _vs_gp_prof_ar(wc, rank, size, buf, &p)) != VS_OK) goto done;
    /* bw and latency, for group sizes the table lacks: the world's row, as bus
       bandwidth 2 (n-1)/n x 4 MiB over the 4 MiB time less the 4 B time. */
    if (size > 1) {
        const double* t = _vs_gp_ar_row(&p, size);
        const int K = VS_PROFILE_AR_SIZES - 1;
        if (t) {
            p.latency_s = t[0];
            p.bw_bytes_s = 2.0 * (size - 1) / size * _vs_gp_ar_bytes[K] / (t[K] > t[0] ? t[K] - t[0] : t[K]);
        }
    }
    /* p2p: a 4 MiB ping-pong between ranks 0 and 1 (half the round trip, less
       the latency), median of 5 after a warm-up. */
    if (size > 1) {
        double tq[6], bytes = (double)(N * sizeof(float));
        for (int i = 0; i < 6 && r == VS_OK; i++) {
            double t0 = _vs_now();
            if (rank == 0) {
                r = vs_send(wc, buf, N, VS_F32, 1, NULL);
                if (r == VS_OK) r = vs_recv(wc, buf, N, VS_F32, 1, NULL);
            } else if (rank == 1) {
                r = vs_recv(wc, buf, N, VS_F32, 0, NULL);
                if (r == VS_OK) r = vs_send(wc, buf, N, VS_F32, 0, NULL);
            }
            tq[i] = (_vs_now() - t0) / 2;
        }
        if (r != VS_OK) goto done;
        qsort(tq + 1, 5, sizeof(double), _vs_gp_dcmp);
        double t = tq[3] > p.latency_s ? tq[3] - p.latency_s : tq[3];
        v[5] = rank == 0 ? bytes / t : 0;
        if ((r = vs_broadcast(wc, &v[5], &v[5], 1, VS_F64, 0, NULL)) != VS_OK) goto done;
        p.p2p_bw_bytes_s = v[5];
    }
    /* tp_s: the layers once more for each group size of the table, TP-sharded
       (megatron) where the model's shapes allow it */
    for (int g = 0; g < VS_PROFILE_AR_GROUPS && size > 1; g++) {
        vs_plan tplan;
        memset(&tplan, 0, sizeof tplan);
        tplan.tp = p.ar_n[g], tplan.policy = VS_TP_MEGATRON;
        if (p.ar_n[g] < 2 || !_vs_gp_ar_row(&p, p.ar_n[g])) continue;
        if (vs_plan_check(&tplan, m) != VS_OK) { // e.g. a TP size that does not divide the heads
            vs_clear_error();
            continue;
        }
        double x = 0, f, first = 0;
        vs_result rl = _vs_gp_prof_layers(w, wc, m, data, data_user, p.ar_n[g], &p, &x);
        if (rl != VS_OK) _vs_gp_fmt(msg0, sizeof msg0, "%s", vs_last_error());
        f = rl != VS_OK ? (double)(rank + 1) : (double)(size + 1);
        if ((r = vs_all_reduce(wc, &f, &first, 1, VS_F64, VS_OP_MIN, NULL)) != VS_OK) goto done;
        if (first <= size) {
            if (rl != VS_OK) r = vs_set_error(rl, "vs_profile_measure: timing the TP%d layers: %s", p.ar_n[g], msg0);
            else r = vs_set_error(VS_ERR_INVALID, "vs_profile_measure: timing the TP%d layers failed on rank %d (see its error)",
                                  p.ar_n[g], (int)first - 1);
            goto done;
        }
        if ((r = vs_all_reduce(wc, &x, &x, 1, VS_F64, VS_OP_SUM, NULL)) != VS_OK) goto done;
        p.tp_s[g] = x / size;
    }
    *out = p;
done:
    vs_free(w, buf);
    return r;
}

/* A profile as vs_profile_parse reads it back: finite figures >= 0 (tp_s any
   finite value), group sizes 0 (unused) or 2..1000000, each once. */
_VS_HL_PRIVATE vs_result _vs_gp_profile_ok(const vs_profile* p, const char* fn)
{
    const double v[7] = {p->flop_s, p->bw_bytes_s, p->latency_s, p->p2p_bw_bytes_s, p->call_s, p->instr_s, p->opt_s};
    static const char* const vn[7] = {"flop_s", "bw_bytes_s", "latency_s", "p2p_bw_bytes_s", "call_s", "instr_s", "opt_s"};
    for (int i = 0; i < 7; i++)
        if (!(v[i] >= 0 && v[i] < HUGE_VAL))
            return vs_set_error(VS_ERR_INVALID, "%s: %s = %g (finite, >= 0; 0: not known)", fn, vn[i], v[i]);
    for (int g = 0; g < VS_PROFILE_AR_GROUPS; g++) {
        if (p->ar_n[g] == 0) continue;
        if (p->ar_n[g] < 2 || p->ar_n[g] > 1000000)
            return vs_set_error(VS_ERR_INVALID, "%s: ar_n[%d] = %d (0: unused, else a group size 2..1000000)", fn, g,
                                p->ar_n[g]);
        for (int h = 0; h < g; h++)
            if (p->ar_n[h] == p->ar_n[g])
                return vs_set_error(VS_ERR_INVALID, "%s: ar_n[%d] = %d, as ar_n[%d] (each group size once)", fn, g,
                                    p->ar_n[g], h);
        for (int k = 0; k < VS_PROFILE_AR_SIZES; k++)
            if (!(p->ar_s[g][k] >= 0 && p->ar_s[g][k] < HUGE_VAL))
                return vs_set_error(VS_ERR_INVALID, "%s: ar_s[%d][%d] = %g (finite, >= 0)", fn, g, k, p->ar_s[g][k]);
        if (!(fabs(p->tp_s[g]) < HUGE_VAL))
            return vs_set_error(VS_ERR_INVALID, "%s: tp_s[%d] = %g (finite)", fn, g, p->tp_s[g]);
    }
    if (!(p->w_share >= 0 && p->w_share < 1))
        return vs_set_error(VS_ERR_INVALID, "%s: w_share = %g (in [0, 1); 0: not measured)", fn, p->w_share);
    return VS_OK;
}

VS_API int vs_profile_print(const vs_profile* p, char* buf, size_t cap)
{
    if (!p) return vs_set_error(VS_ERR_NULL, "vs_profile_print: profile is NULL"), -1;
    if (!buf && cap)
        return vs_set_error(VS_ERR_NULL, "vs_profile_print: buf is NULL with cap %zu (NULL only with cap 0)", cap), -1;
    if (buf && cap) buf[0] = 0;
    if (_vs_gp_profile_ok(p, "vs_profile_print")) return -1;
    size_t len = 0;
    _vs_gp_cat(buf, cap, &len, "flop_s=%.17g bw=%.17g latency=%.17g p2p_bw=%.17g call=%.17g instr=%.17g opt=%.17g",
               p->flop_s, p->bw_bytes_s, p->latency_s, p->p2p_bw_bytes_s, p->call_s, p->instr_s, p->opt_s);
    for (int g = 0; g < VS_PROFILE_AR_GROUPS; g++)
        if (p->ar_n[g] > 0)
            _vs_gp_cat(buf, cap, &len, " ar%d=%.17g,%.17g,%.17g,%.17g", p->ar_n[g], p->ar_s[g][0], p->ar_s[g][1],
                       p->ar_s[g][2], p->ar_s[g][3]);
    for (int g = 0; g < VS_PROFILE_AR_GROUPS; g++)
        if (p->ar_n[g] > 0 && p->tp_s[g] != 0) _vs_gp_cat(buf, cap, &len, " tp%d=%.17g", p->ar_n[g], p->tp_s[g]);
    if (p->w_share > 0) _vs_gp_cat(buf, cap, &len, " w_share=%.17g", p->w_share);
    return len > (size_t)INT_MAX ? INT_MAX : (int)len;
}

/* v with an SI prefix and 3 significant digits: "22.6 GFLOP/s", "1.35 us". */
_VS_HL_PRIVATE const char* _vs_gp_fmt_si(double v, const char* unit, char* b, size_t n)
{
    static const char* const pre[] = {"p", "n", "u", "m", "", "k", "M", "G", "T", "P"};
    int k = 4;
    double a = fabs(v), s = 1;
    while (a > 0 && a < HUGE_VAL && k > 0 && a / s < 0.9995) k--, s /= 1e3;
    while (a < HUGE_VAL && k < 9 && a / s >= 999.5) k++, s *= 1e3;
    snprintf(b, n, "%.3g %s%s", v / s, pre[k], unit);
    return b;
}

VS_API int vs_profile_describe(const vs_profile* p, char* buf, size_t cap)
{
    if (!p) {
        vs_set_error(VS_ERR_NULL, "vs_profile_describe: profile is NULL");
        return -1;
    }
    if (!buf) cap = 0;
    if (cap) buf[0] = 0;
    size_t len = 0;
    char a[32], b[32], c[32], d[32];
    _vs_gp_cat(buf, cap, &len, "compute %s%s; host %s a layer call, %s an engine instruction; optimizer %s an element\n",
               _vs_gp_fmt_si(1 / (p->flop_s > 0 ? p->flop_s : 1e-10), "FLOP/s", a, sizeof a),
               p->flop_s > 0 ? "" : " (default)", _vs_gp_fmt_si(p->call_s, "s", b, sizeof b),
               _vs_gp_fmt_si(p->instr_s, "s", c, sizeof c), _vs_gp_fmt_si(p->opt_s, "s", d, sizeof d));
    double bw = p->bw_bytes_s > 0 ? p->bw_bytes_s : 1e9;
    _vs_gp_cat(buf, cap, &len, "collectives %s%s, %s%s a call; point-to-point %s%s\n", _vs_gp_fmt_si(bw, "B/s", a, sizeof a),
               p->bw_bytes_s > 0 ? "" : " (default)",
               _vs_gp_fmt_si(p->latency_s > 0 ? p->latency_s : 2e-5, "s", b, sizeof b), p->latency_s > 0 ? "" : " (default)",
               _vs_gp_fmt_si(p->p2p_bw_bytes_s > 0 ? p->p2p_bw_bytes_s : bw, "B/s", c, sizeof c),
               p->p2p_bw_bytes_s > 0 ? "" : " (default: the collectives')");
    int any = 0;
    for (int g = 0; g < VS_PROFILE_AR_GROUPS; g++) {
        if (p->ar_n[g] <= 0) continue;
        _vs_gp_cat(buf, cap, &len, "%s%d ranks", any++ ? "; " : "all-reduce of 4 B, 64 KiB, 512 KiB, 4 MiB: ", p->ar_n[g]);
        for (int k = 0; k < VS_PROFILE_AR_SIZES; k++)
            _vs_gp_cat(buf, cap, &len, "%s%s", k ? ", " : " ", _vs_gp_fmt_si(p->ar_s[g][k], "s", a, sizeof a));
    }
    _vs_gp_cat(buf, cap, &len, "%s\n", any ? "" : "all-reduce: not measured (the planner uses bandwidth and latency)");
    any = 0;
    for (int g = 0; g < VS_PROFILE_AR_GROUPS; g++) {
        if (p->ar_n[g] <= 0 || p->tp_s[g] == 0) continue;
        _vs_gp_cat(buf, cap, &len, "%s%s%s a byte on %d ranks", any++ ? ", " : "TP collectives in place: ",
                   p->tp_s[g] > 0 ? "+" : "", _vs_gp_fmt_si(p->tp_s[g], "s", a, sizeof a), p->ar_n[g]);
    }
    if (any) _vs_gp_cat(buf, cap, &len, "\n");
    if (p->w_share > 0)
        _vs_gp_cat(buf, cap, &len, "split layers' backward: W %.0f%%, B %.0f%%\n", 100 * p->w_share, 100 * (1 - p->w_share));
    return len > (size_t)INT_MAX ? INT_MAX : (int)len;
}

/* "key=" value: a finite number (>= 0 unless `neg`) at v ending at a blank, the
   end or `stop`; an error quotes the whole value from `all` on. */
_VS_HL_PRIVATE vs_result _vs_gp_parse_num(const char* key, size_t kl, const char* all, const char* v, char stop,
                                          int neg, double* out, const char** end)
{
    char* e;
    double x = strtod(v, &e);
    if (e == v || (*e && *e != ' ' && *e != '\t' && *e != '\n' && *e != '\r' && *e != stop) || !(fabs(x) < HUGE_VAL) ||
        (!neg && !(x >= 0)))
        return vs_set_error(VS_ERR_INVALID, "vs_profile_parse: %.*s = '%.*s' (%s)", (int)kl, key,
                            (int)strcspn(all, " \t\n"), all,
                            neg ? "a finite number" : all == v ? "a finite number >= 0" : "finite numbers >= 0");
    *out = x == 0 ? 0.0 : x; // (-0 is 0, "not measured", as print writes it back: found by fuzz_profile)
    *end = e;
    return VS_OK;
}

VS_API vs_result vs_profile_parse(const char* text, vs_profile* out)
{
    if (!text || !out) return vs_set_error(VS_ERR_NULL, "vs_profile_parse: %s is NULL", text ? "out" : "text");
    vs_profile p;
    memset(&p, 0, sizeof p);
    const char* s = text;
    vs_result r;
    unsigned seen = 0, seen_g[VS_PROFILE_AR_GROUPS] = {0};
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') s++;
        if (!*s) break;
        const char* eq = s;
        while (*eq && *eq != '=' && *eq != ' ' && *eq != '\t' && *eq != '\n') eq++;
        size_t kl = (size_t)(eq - s);
        if (*eq != '=')
            return vs_set_error(VS_ERR_INVALID, "vs_profile_parse: '%.*s' is not key=value", (int)(kl < 40 ? kl : 40), s);
        int isar = kl > 2 && !strncmp(s, "ar", 2) && s[2] >= '0' && s[2] <= '9';
        if (isar || (kl > 2 && !strncmp(s, "tp", 2) && s[2] >= '0' && s[2] <= '9')) { // arN=t0,t1,t2,t3, tpN=x
            long n = 0;
            for (size_t i = 2; i < kl && n <= 1000000; i++)
                n = s[i] >= '0' && s[i] <= '9' ? n * 10 + (s[i] - '0') : 1000001;
            if (n < 2 || n > 1000000)
                return vs_set_error(VS_ERR_INVALID, "vs_profile_parse: '%.*s': the group size after '%.2s' must be an integer >= 2",
                                    (int)(kl < 40 ? kl : 40), s, s);
            int g = 0;
            while (g < VS_PROFILE_AR_GROUPS && p.ar_n[g] && p.ar_n[g] != (int)n) g++;
            if (g == VS_PROFILE_AR_GROUPS)
                return vs_set_error(VS_ERR_INVALID, "vs_profile_parse: '%.*s': more than %d group sizes",
                                    (int)(kl < 40 ? kl : 40), s, VS_PROFILE_AR_GROUPS);
            unsigned bit = isar ? 1u : 2u; // arN and tpN, each once per group size
            if (seen_g[g] & bit)
                return vs_set_error(VS_ERR_INVALID, "vs_profile_parse: '%.*s' twice", (int)(kl < 40 ? kl : 40), s);
            seen_g[g] |= bit;
            p.ar_n[g] = (int)n;
            const char* v = eq + 1;
            if (!isar) {
                if ((r = _vs_gp_parse_num(s, kl, v, v, 0, 1, &p.tp_s[g], &v)) != VS_OK) return r;
                s = v;
                continue;
            }
            for (int k = 0; k < VS_PROFILE_AR_SIZES; k++) {
                const char* e;
                if ((r = _vs_gp_parse_num(s, kl, eq + 1, v, k + 1 < VS_PROFILE_AR_SIZES ? ',' : 0, 0, &p.ar_s[g][k], &e)) != VS_OK)
                    return r;
                if (k + 1 < VS_PROFILE_AR_SIZES && *e != ',')
                    return vs_set_error(VS_ERR_INVALID, "vs_profile_parse: %.*s = '%.*s' (%d numbers separated by ',')",
                                        (int)kl, s, (int)strcspn(eq + 1, " \t\n"), eq + 1, VS_PROFILE_AR_SIZES);
                v = k + 1 < VS_PROFILE_AR_SIZES ? e + 1 : e;
            }
            s = v;
            continue;
        }
        static const char* const keys[8] = {"flop_s", "bw", "latency", "p2p_bw", "call", "instr", "opt", "w_share"};
        double* const dsts[8] = {&p.flop_s, &p.bw_bytes_s, &p.latency_s, &p.p2p_bw_bytes_s, &p.call_s, &p.instr_s, &p.opt_s,
                                 &p.w_share};
        int k = 0;
        while (k < 8 && (strlen(keys[k]) != kl || strncmp(s, keys[k], kl))) k++;
        if (k == 8)
            return vs_set_error(VS_ERR_INVALID,
                                "vs_profile_parse: unknown key '%.*s' (flop_s, bw, latency, p2p_bw, call, instr, opt, "
                                "w_share, arN, tpN)", (int)(kl < 40 ? kl : 40), s);
        if (seen & (1u << k)) return vs_set_error(VS_ERR_INVALID, "vs_profile_parse: '%.*s' twice", (int)kl, s);
        seen |= 1u << k;
        double* dst = dsts[k];
        const char* e;
        if ((r = _vs_gp_parse_num(s, kl, eq + 1, eq + 1, 0, 0, dst, &e)) != VS_OK) return r;
        if (dst == &p.w_share && !(p.w_share < 1))
            return vs_set_error(VS_ERR_INVALID, "vs_profile_parse: w_share = '%.*s' (a share of the backward, in [0, 1))",
                                (int)strcspn(eq + 1, " \t\n"), eq + 1);
        s = e;
    }
    *out = p;
    return VS_OK;
}
// >>generate-plan end

// >>train ----------------------------------------------------------------------

/* A parameter of the model (unique by name) as this rank holds it. */
typedef struct _vs_hl_param {
    const vs_param_decl* d;
    vs_placement tp;            // along TP
    int ddp;                    // its index in this rank's DDP, or -1 (not on this stage)
    int tied_remote;            // used by layers on two stages: its gradients are summed between them
    int chunk_lo, chunk_hi;     // the chunks of this stage that use it (lowest, highest); -1: none
    int chunk_a, chunk_b;       // tied: a chunk on each of the two stages (the lowest overall, the highest)
    int users;                  // layers that use it (2+: tied)
    int first_here;             // the first layer on this stage that uses it, or -1
    int group;                  // ZeRO-3: its ready group, first_here + 1 (0: not on this stage, or not ZeRO-3)
    void* rscratch;             // device, tied across stages: the other stage's part lands here (on_step)
    void* scratch;              // a later user on this stage adds here (the gradient's dtype), summed once in on_step, so the
                                // bits equal the two stages' sum when PP puts the users apart
    int64_t lshape[VS_TENSOR_MAX_DIMS], loff[VS_TENSOR_MAX_DIMS];
    int64_t lnumel;
} _vs_hl_param;

/* A layer's context and its training state (call->user points at ctx, the
   first member). */
typedef struct _vs_hl_layer {
    vs_layer_ctx ctx;
    struct vs_train* t;
} _vs_hl_layer;

#define _VS_DATA_POS_BYTES 80
#define _VS_DATA_ENTRY "__data" // a data loader's position: a blob of _VS_DATA_POS_BYTES, the same on every rank
struct vs_train {
    uint32_t magic; // _VS_HL_LIVE
    vs_world* w;
    const vs_model_desc* model;
    vs_train_desc desc;
    vs_plan plan;
    vs_mesh* mesh;
    vs_mesh* given; // vs_train_reconfigure's (PP, DPR 1, DPS, TP) mesh, kept while mesh (PP, DP, TP on its ranks) lives
    vs_mesh* tpm;  // TP submesh (NULL: TP = 1)
    vs_mesh* dpm;  // DP submesh (NULL: DP = 1); HSDP: over DPR and DPS
    vs_mesh* ppm;  // PP submesh (NULL: PP = 1)
    int pp, dp, tp, stage, dp_rank, M;
    int tpdim; // the TP dim's index in the mesh: 2, or 3 with HSDP (PP, DPR, DPS, TP)
    vs_pipe_unit* units;
    _vs_hl_layer* lay;
    vs_pipe_plan pplan;
    vs_pipe* pipe;
    vs_pipe_sched* sched;
    vs_pipe_sched* esched; // vs_train_eval's: sched's forwards (made at the first evaluation)
    vs_ddp* ddp;
    vs_ckpt* ck;
    _vs_hl_param* prm;
    int np;
    int* layer_prm; // [layer * VS_LAYER_MAX_PARAMS + i]: index into prm
    const vs_batch* batch; // during a step
    const char* batch_fn;  // the call that gave it (vs_train_step or vs_train_eval), for the data callback's errors
    int64_t rows_dp, rows_mb;
    int64_t skipped;  // steps skipped for non-finite gradients (the steps taken are DDP's count)
    vs_loss_scale ls; // resolved (ls.enable 1: scaling)
    double scale;     // the loss scale of the next step (1: none)
    int64_t good;     // good steps in a row since the scale last changed
    double grad_norm; // the last step's global gradient norm (NaN before the first)
    int64_t init_peak, model_bytes;
    vs_result hook_err;
    double z3_time;     // ZeRO-3: the unit hooks' time in the current call (vs_train_stats.t_gather)
    int64_t z3_gathers; // and their gathers
    /* NCCL: parameters, gradients and activations are device memory, the layers
       run on `stream`; the loss's microbatch mean is taken on the device
       (dloss) and travels with the gradient norm's all-reduce and read
       (vs_clip_desc.carry), added by one rank per DP replica (loss_carrier:
       PP and TP coordinate 0; every stage and TP rank holds the same loss) */
    int dev, own_stream;
    void* stream;
    void* ev;     // cudaEvent_t: orders a communicator's stream after `stream`
    void* k[2];   // its kernels: vs_hl_tied_add, vs_hl_loss_mean
    double* dloss;
    int loss_carrier;
    vs_zero_stage zero;
    int acc_n;       // calls taken in the current step (desc.accumulate)
    double acc_loss; // host: their DP-local losses summed
    int64_t acc_tokens; // their tokens
    double acc_t0;   // when the step's first call started
    int64_t shape0[VS_BATCH_MAX][VS_PIPE_MAX_DIMS]; // fixed shapes: the first step's batch (rows 0: none yet)
    /* The data loader attached (vs_data_desc.train, >>data): its position is
       saved and loaded with the state; one loaded before the loader opened
       waits in data_pos. */
    vs_data* data;
    unsigned char data_pos[_VS_DATA_POS_BYTES];
    int has_data_pos;
    /* the attached loader's position that goes with the state: at the last
       step done (or seek): a step that failed took its batch, not the state's */
    unsigned char step_pos[_VS_DATA_POS_BYTES];
    int has_step_pos;
};

/* The attached data loader's hooks (>>data, below). */
_VS_HL_PRIVATE void _vs_data_detach(vs_data* d);
_VS_HL_PRIVATE void _vs_data_pos(const vs_data* d, unsigned char* blob);
_VS_HL_PRIVATE vs_result _vs_data_restore(vs_data* d, const unsigned char* blob, size_t bytes, const char* fn,
                                          const char* path);
_VS_HL_PRIVATE vs_result _vs_data_rebind(vs_data* d, vs_train* nt);
_VS_HL_PRIVATE int64_t _vs_data_batch(const vs_data* d);

/* A training state can tell it was freed (vs_train_free's comment): its magic,
   kept readable a while by vs_free_later. */
#define _VS_HL_LIVE 0x7673544cu /* "vsTL" */
#define _VS_HL_DEAD 0x76734444u /* "vsDD": freed */
#define _VS_HL_OWNER "a training state (vs_train_free)" // (the refusals add "which frees it")
_VS_HL_PRIVATE vs_result _vs_hl_gone(const char* fn, const vs_train* t)
{
    if (t->magic == _VS_HL_DEAD) return vs_set_error(VS_ERR_STATE, "%s: this training state was already freed", fn);
    return vs_set_error(VS_ERR_INVALID, "%s: %p is not a live training state", fn, (const void*)t);
}
/* VS_OK for a live training state or NULL (the function's own check names a NULL). */
#define _VS_HL_GONE(fn, t) ((t) && (t)->magic != _VS_HL_LIVE ? _vs_hl_gone(fn, (t)) : VS_OK)

/* Device path helpers. The one kernel of this part: a tied parameter's later
   user's gradient added into the first one's and cleared (both users on this
   stage), written once for the host loop and NVRTC. */
/* t: the gradient's dtype, 0 f32, 1 bf16, 2 f16 (the sum rounded to it once). */
#define _VS_HL_KERNELS \
    VS_MKGLOBAL VS_MKSEL(_vs_hlk_tied_add, vs_hl_tied_add)(void* g, void* s, int t, long long n) \
    { \
        VS_MKLOOP(x, n) { \
            VS_MKN(st)(g, t, x, VS_MKN(ld)(g, t, x) + VS_MKN(ld)(s, t, x)); \
            VS_MKN(st)(s, t, x, 0.0f); \
        } \
    } \
    /* the step's loss: the microbatch losses summed in order in double, over m \
       (vs_pipe_run's host sum); one thread */ \
    VS_MKGLOBAL VS_MKSEL(_vs_hlk_loss_mean, vs_hl_loss_mean)(double* out, const float* l, long long m, int add) \
    { \
        VS_MKLOOP(x, 1) { \
            double s = 0.0; \
            long long i; \
            for (i = 0; i < m; i++) s += (double)l[i]; \
            out[x] = add ? out[x] + s / (double)m : s / (double)m; \
        } \
    }
#define VS_MK_DEVICE 0
#ifndef VS_MK_HOST_SHARED /* (the shared conversions, once per file: vescale_ddp.h built them here already) */
#define VS_MK_HOST_SHARED
VS_MK_HOSTBITS
VS_MK_DTYPES
#endif
_VS_HL_KERNELS
#undef VS_MK_DEVICE

_VS_HL_PRIVATE int _vs_hl_kdt(vs_dtype t) { return t == VS_F32 ? 0 : t == VS_BF16 ? 1 : 2; }

/* The kernels' declarations (vescale_mesh.h's vs_kernel_decl) and host builds. */
_VS_HL_PRIVATE void _vs_hlc_tied_add(void** a, vs_kernel_cost* c) /* g, s, t, n */
{
    long long n = VS_MKARG(long long, 3);
    double e = VS_MKESZ(VS_MKARG(int, 2));
    c->flops = (double)n;
    c->bytes = 4.0 * (double)n * e; // g and s read, g and s (cleared) written
    c->len[0] = c->len[1] = (long long)((double)n * e);
}
_VS_HL_PRIVATE void _vs_hlc_loss_mean(void** a, vs_kernel_cost* c) /* out, l, m, add */
{
    long long m = VS_MKARG(long long, 2);
    c->flops = (double)m + 1;
    c->bytes = 4.0 * (double)m + (VS_MKARG(int, 3) ? 16 : 8);
    c->len[0] = 8, c->len[1] = m * 4;
}
static const vs_kernel_decl _vs_hl_kdecls[2] _VS_UNUSED = {
    {"vs_hl_tied_add", "wwil", "g s t n", _vs_hlc_tied_add, 0},
    {"vs_hl_loss_mean", "wrli", "out l m add", _vs_hlc_loss_mean, 0}};
_VS_HL_PRIVATE void _vs_hl_khost(int ki, void** a)
{
    if (ki == 0) _vs_hlk_tied_add(*(void**)a[0], *(void**)a[1], *(int*)a[2], *(long long*)a[3]);
    else _vs_hlk_loss_mean(*(double**)a[0], *(const float**)a[1], *(long long*)a[2], *(int*)a[3]);
}

#ifdef VESCALE_NCCL
#define VS_MK_DEVICE 1
static const char _vs_hl_body[] _VS_UNUSED = VS_MKSTR(_VS_HL_KERNELS) "\n";
#undef VS_MK_DEVICE
static const vs_kernel_text _vs_hl_text _VS_UNUSED = {"vescale_hl_kernels.cu", _vs_hl_body, 2, _vs_hl_kdecls,
                                                      _vs_hl_khost};

/* `c`'s stream after the compute stream: what the layers enqueued comes first. */
_VS_HL_PRIVATE vs_result _vs_hl_fence(vs_train* t, vs_comm* c, const char* fn)
{
    cudaError_t e = cudaEventRecord((cudaEvent_t)t->ev, (cudaStream_t)t->stream);
    if (e == cudaSuccess) e = cudaStreamWaitEvent((cudaStream_t)vs_comm_stream(c), (cudaEvent_t)t->ev, 0);
    return e == cudaSuccess ? VS_OK : vs_cuda_error((int)e, fn, "ordering a communicator after the compute stream");
}

_VS_HL_PRIVATE vs_result _vs_hl_tied_add(vs_train* t, void* g, void* scr, int dt, int64_t n)
{
    if (n <= 0) return VS_OK;
    long long nn = n;
    void* args[] = {&g, &scr, &dt, &nn};
    int64_t blocks = (n + VS_MKT - 1) / VS_MKT;
    dim3 grid, block;
    grid.x = (unsigned)(blocks > 8192 ? 8192 : blocks), grid.y = grid.z = 1;
    block.x = VS_MKT, block.y = block.z = 1;
    cudaError_t e = cudaLaunchKernel((const void*)t->k[0], grid, block, args, 0, (cudaStream_t)t->stream);
    return e == cudaSuccess ? VS_OK : vs_cuda_error((int)e, "vs_train_step", "the tied-gradient kernel");
}

/* The step's loss on the device: the pipeline's microbatch losses (left there,
   vs_pipe_desc.defer_loss) averaged into t->dloss on the compute stream. Its DP
   mean is not a collective of its own: the norm's all-reduce sums it over the
   mesh (vs_clip_desc.carry, added by the loss carriers alone) and its one read
   brings it to the host with the norm; the step divides by DP. */
_VS_HL_PRIVATE vs_result _vs_hl_loss_device(vs_train* t, double* out, int add, const char* fn)
{
    const float* ml = NULL;
    int m = 0;
    _VS_TRY(vs_pipe_loss_device(t->pipe, &ml, &m));
    long long mm = m;
    void* args[] = {&out, &ml, &mm, &add};
    dim3 one, block;
    one.x = one.y = one.z = 1;
    block.x = VS_MKT, block.y = block.z = 1;
    cudaStream_t st = (cudaStream_t)t->stream;
    cudaError_t e = cudaLaunchKernel((const void*)t->k[1], one, block, args, 0, st);
    return e == cudaSuccess ? VS_OK : vs_cuda_error((int)e, fn, "the loss kernel");
}

/* A parameter tied across two stages, on GPUs: its two parts exchanged over PP
   (after the compute stream, which then waits for the exchange) and added by
   the kernel, all in stream order: no host wait (vs_pipe_tie_grads sums on the
   host). The sum is a + b on both stages: the same bits. */
_VS_HL_PRIVATE vs_result _vs_hl_tie_device(vs_train* t, _vs_hl_param* q, void* g, vs_dtype gdt)
{
    const char* fn = "vs_train_step";
    int sa = t->pplan.chunk_stage[q->chunk_a], sb = t->pplan.chunk_stage[q->chunk_b];
    if (sa == sb || (t->stage != sa && t->stage != sb) || !t->ppm) return VS_OK;
    int peer = t->stage == sa ? sb : sa;
    vs_comm* pc = vs_mesh_comm(t->ppm);
    vs_work* w = NULL;
    _VS_TRY(_vs_hl_fence(t, pc, fn));
    vs_result r = vs_group_start(pc);
    if (!r) {
        r = vs_send(pc, g, (size_t)q->lnumel, gdt, peer, NULL);
        if (!r) r = vs_recv(pc, q->rscratch, (size_t)q->lnumel, gdt, peer, NULL);
        vs_result r2 = vs_group_end(pc, &w);
        if (!r) r = r2;
    }
    if (!r && w) r = vs_wait_stream(w, t->stream);
    if (!r) r = _vs_hl_tied_add(t, g, q->rscratch, _vs_hl_kdt(gdt), q->lnumel);
    return r ? vs_set_error(r, "%s: the tied parameter \"%s\" between stages %d and %d: %s", fn, q->d->name, sa, sb,
                            vs_last_error())
             : VS_OK;
}
#endif

_VS_HL_PRIVATE int _vs_hl_find(const vs_train* t, const char* name)
{
    for (int i = 0; i < t->np; i++)
        if (!strcmp(t->prm[i].d->name, name)) return i;
    return -1;
}

/* The data callback: rows of the global batch for this DP rank's microbatch. */
_VS_HL_PRIVATE vs_result _vs_hl_data(vs_pipe_call* c)
{
    vs_train* t = (vs_train*)c->user;
    const vs_batch* b = t->batch;
    const char* name = c->out[0].name;
    for (int i = 0; b && i < b->n; i++) {
        if (strcmp(b->name[i], name)) continue;
        int64_t shape[VS_PIPE_MAX_DIMS];
        size_t row = vs_dtype_size(b->dtype[i]);
        for (int d = 1; d < b->ndim[i]; d++) row *= (size_t)b->shape[i][d];
        for (int d = 0; d < b->ndim[i]; d++) shape[d] = b->shape[i][d];
        shape[0] = t->rows_mb;
        void* out;
        _VS_TRY(vs_pipe_output(c, 0, b->dtype[i], b->ndim[i], shape, &out));
        int64_t first = (b->dp_local > 1 ? 0 : (int64_t)t->dp_rank * t->rows_dp) + (int64_t)c->mb * t->rows_mb;
        const char* src = (const char*)b->data[i] + (size_t)first * row;
#ifdef VESCALE_NCCL
        if (t->dev) { // host (pinned: asynchronous) or device memory, on the compute stream
            cudaError_t e = cudaMemcpyAsync(out, src, (size_t)t->rows_mb * row, cudaMemcpyDefault, (cudaStream_t)c->stream);
            return e == cudaSuccess ? VS_OK : vs_cuda_error((int)e, t->batch_fn ? t->batch_fn : "vs_train_step",
                                                                 "copying the batch to the device");
        }
#endif
        memcpy(out, src, (size_t)t->rows_mb * row);
        return VS_OK;
    }
    return vs_set_error(VS_ERR_INVALID, "%s: the batch has no \"%s\", which the model takes",
                        t->batch_fn ? t->batch_fn : "vs_train_step", name);
}

/* Before a layer's backward part: its gradient views for this pass (asking DDP
   for one starts the pass; under ZeRO-2 it stages the bucket), or the scratch of
   a later user of a tied parameter. */
_VS_HL_PRIVATE vs_result _vs_hl_grads(vs_pipe_call* c, const vs_pipe_unit** u)
{
    _vs_hl_layer* hl = (_vs_hl_layer*)c->user;
    vs_train* t = hl->t;
    int l = c->unit;
    *u = &t->model->layers[l].unit;
    for (int i = 0; i < t->model->layers[l].nparams; i++) {
        const _vs_hl_param* q = &t->prm[t->layer_prm[l * VS_LAYER_MAX_PARAMS + i]];
        if (hl->ctx.grad[i] || q->ddp < 0) continue;
        hl->ctx.grad[i] = q->first_here != l ? (void*)q->scratch : vs_ddp_grad(t->ddp, q->ddp);
        if (!hl->ctx.grad[i]) return vs_set_error(VS_ERR_STATE, "gradient of \"%s\": %s", q->d->name, vs_last_error());
    }
    return VS_OK;
}
_VS_HL_PRIVATE vs_result _vs_hl_bwd(vs_pipe_call* c)
{
    const vs_pipe_unit* u;
    _VS_TRY(_vs_hl_grads(c, &u));
    return u->backward(c);
}
_VS_HL_PRIVATE vs_result _vs_hl_bwd_input(vs_pipe_call* c)
{
    const vs_pipe_unit* u;
    _VS_TRY(_vs_hl_grads(c, &u));
    return u->backward_input(c);
}
_VS_HL_PRIVATE vs_result _vs_hl_bwd_weight(vs_pipe_call* c)
{
    const vs_pipe_unit* u;
    _VS_TRY(_vs_hl_grads(c, &u));
    return u->backward_weight(c);
}

_VS_HL_PRIVATE vs_result _vs_hl_on_step(void* user)
{
    vs_train* t = (vs_train*)user;
    for (int i = 0; i < t->np; i++) { // tied: the users' parts summed, then reduced
        _vs_hl_param* q = &t->prm[i];
        if (q->ddp < 0 || q->users < 2) continue;
        void* g = vs_ddp_grad(t->ddp, q->ddp);
        vs_dtype gdt = vs_ddp_grad_dtype(t->ddp, q->ddp);
        if (q->scratch) { // both users here: first user's part + the later one's (then cleared)
#ifdef VESCALE_NCCL
            if (t->dev)
                _VS_TRY(_vs_hl_tied_add(t, g, q->scratch, _vs_hl_kdt(gdt), q->lnumel));
            else
#endif
                _vs_hlk_tied_add(g, q->scratch, _vs_hl_kdt(gdt), q->lnumel);
        }
        /* accumulating: the stages' parts summed once, at the end (ZeRO-2 reduces
           every call's gradients on their own: summed every call) */
        int last = t->acc_n + 1 >= t->desc.accumulate || t->zero >= VS_ZERO_2;
#ifdef VESCALE_NCCL
        if (q->tied_remote && t->dev && last)
            _VS_TRY(_vs_hl_tie_device(t, q, g, gdt));
        else
#endif
        if (q->tied_remote && last) _VS_TRY(vs_pipe_tie_grads(t->pipe, q->chunk_a, q->chunk_b, g, (size_t)q->lnumel, gdt));
        _VS_TRY(vs_ddp_grad_ready(t->ddp, q->ddp));
    }
    return VS_OK;
}

/* The unit hook. After a layer's last backward part of the step's last
   microbatch (grads_final: W under the zero-bubble kinds, the backward after
   a recompute), the parameters it alone uses are marked ready, so their
   buckets reduce under the rest of the backward (a chunk's SYNC comes only
   after its last layer's); shared ones wait for on_step. ZeRO-3 also: before
   a part of layer l, its groups gathered (a shared parameter's is its first
   user's) and its views bound; after it, released and the views cleared. A
   recomputed forward keeps them for the backward right after. */
_VS_HL_PRIVATE vs_result _vs_hl_on_unit_do(vs_train* t, const vs_pipe_hook_event* e);
_VS_HL_PRIVATE vs_result _vs_hl_on_unit(void* user, const vs_pipe_hook_event* e)
{
    vs_train* t = (vs_train*)user;
    double t0 = _vs_now();
    vs_result r = _vs_hl_on_unit_do(t, e);
    if (t->zero == VS_ZERO_3) t->z3_time += _vs_now() - t0;
    return r;
}
_VS_HL_PRIVATE vs_result _vs_hl_on_unit_do(vs_train* t, const vs_pipe_hook_event* e)
{
    const int l = e->unit, np = t->model->layers[l].nparams;
    const int before = e->point == VS_PIPE_HOOK_FORWARD_BEFORE || e->point == VS_PIPE_HOOK_BACKWARD_BEFORE ||
                       e->point == VS_PIPE_HOOK_WEIGHT_BEFORE;
    if (!before && e->point == VS_PIPE_HOOK_FORWARD_AFTER && e->recompute && !e->forward_only) return VS_OK;
    vs_ddp* d = t->ddp;
    for (int i = np - 1; i >= 0 && !before && e->grads_final; i--) { // (last first: buckets go in reverse registration)
        const _vs_hl_param* q = &t->prm[t->layer_prm[l * VS_LAYER_MAX_PARAMS + i]];
        if (q->ddp >= 0 && q->users == 1) _VS_TRY(vs_ddp_grad_ready(d, q->ddp));
    }
    if (t->zero != VS_ZERO_3) return VS_OK;
    for (int i = 0; i < np; i++) {
        const _vs_hl_param* q = &t->prm[t->layer_prm[l * VS_LAYER_MAX_PARAMS + i]];
        int seen = q->ddp < 0;
        for (int j = 0; j < i && !seen; j++) seen = t->prm[t->layer_prm[l * VS_LAYER_MAX_PARAMS + j]].group == q->group;
        if (!seen) _VS_TRY(before ? vs_ddp_gather(d, q->group) : vs_ddp_release(d, q->group));
        t->z3_gathers += !seen && before;
    }
    for (int i = 0; i < np; i++) {
        const _vs_hl_param* q = &t->prm[t->layer_prm[l * VS_LAYER_MAX_PARAMS + i]];
        t->lay[l].ctx.param[i] = q->ddp < 0 || !before ? NULL : vs_ddp_param(d, q->ddp);
        if (before && q->ddp >= 0 && !t->lay[l].ctx.param[i]) return VS_ERR_STATE; // (vs_ddp_param said why)
    }
    return VS_OK;
}

VS_API vs_result vs_train_free(vs_train* t)
{
    if (!t) return VS_OK;
    _VS_TRY(_VS_HL_GONE("vs_train_free", t));
    vs_result r = VS_OK;
    if (t->data) _vs_data_detach(t->data); // (the loader lives on, unattached)
#ifdef VESCALE_NCCL
    // a stalled peer's collective (TP's, DP's) may hold the compute stream: waited for with the mesh's
    // deadline, and if it does not end, the communicators that may hold it are aborted (their operations
    // end), so that no cudaFree below synchronises the device under them (NCCL's deadlock)
    if (t->dev && t->mesh && t->stream && vs_sync_stream(vs_mesh_comm(t->mesh), t->stream) != VS_OK) {
        vs_mesh* held[3] = {t->tpm, t->dpm, t->ppm};
        for (int i = 0; i < 3; i++)
            if (held[i]) (void)vs_comm_abort(vs_mesh_comm(held[i]));
        (void)vs_comm_abort(vs_mesh_comm(t->mesh));
    }
    // the last step's ZeRO all-gathers may still be in flight on DDP's stream (nothing read
    // the parameters since): done before any communicator goes, whose cudaFree would
    // synchronise the device under them (NCCL's deadlock)
    if (t->dev && t->ddp) (void)vs_ddp_synchronize(t->ddp);
#endif
    if (t->ck) vs_ckpt_free(t->ck);
    if (t->sched) vs_pipe_sched_free(t->sched);
    if (t->esched) vs_pipe_sched_free(t->esched);
    if (t->pipe) t->pipe->owner = NULL, vs_pipe_free(t->pipe);
    if (t->ddp) t->ddp->owner = NULL, vs_ddp_free(t->ddp);
#ifdef VESCALE_NCCL
    // nothing of ours still queued before the device frees below, waited for with the mesh's deadline
    // (a stalled peer's collective may hold the stream: a cudaStreamSynchronize waited for good). Its
    // result is not ours to report: a fault there is the calls' that met it, and an aborted mesh
    // answers at once, as before.
    if (t->dev && t->mesh && t->stream) (void)vs_sync_stream(vs_mesh_comm(t->mesh), t->stream);
#endif
    if (t->mesh) r = vs_mesh_free(t->mesh);
    if (t->given) {
        vs_result rg = vs_mesh_free(t->given);
        if (!r) r = rg;
    }
    vs_free(t->w, t->units);
    vs_free(t->w, t->lay);
#ifdef VESCALE_NCCL
    if (t->dev) {
        for (int i = 0; t->prm && i < t->np; i++) {
            vs_device_free(t->w, t->prm[i].scratch), t->prm[i].scratch = NULL;
            vs_device_free(t->w, t->prm[i].rscratch), t->prm[i].rscratch = NULL;
        }
        vs_device_free(t->w, t->dloss);
        if (t->ev) cudaEventDestroy((cudaEvent_t)t->ev);
        if (t->own_stream && t->stream) cudaStreamDestroy((cudaStream_t)t->stream);
    }
#endif
    for (int i = 0; t->prm && i < t->np; i++) vs_free(t->w, t->prm[i].scratch);
    vs_free(t->w, t->prm);
    vs_free(t->w, t->layer_prm);
    t->magic = _VS_HL_DEAD;
    vs_free_later(t->w, t);
    return r;
}

/* vs_parallelize on `mesh` (NULL: a new (PP, DP, TP) mesh over the world),
   which the training state takes over (vs_train_free frees it; on a failure
   it stays the caller's). fn names the caller in messages. noinit: the
   parameters are not drawn (vs_train_reconfigure writes every element after:
   from memory or from the checkpoint; drawing them was two thirds of its
   time). */
_VS_HL_PRIVATE vs_result _vs_hl_make(vs_world* w, const vs_train_desc* d, vs_mesh* mesh, int noinit, const char* fn,
                                     vs_train** out);

VS_API vs_result vs_parallelize(vs_world* w, const vs_train_desc* d, vs_train** out)
{
    return _vs_hl_make(w, d, NULL, 0, "vs_parallelize", out);
}

/* _vs_hl_make's phases, in the order it runs them; each returns the first
   error (t is then freed by _vs_hl_make) and names the caller with fn. */

/* Every zero-is-default value of a vs_train_desc, resolved and checked in this
   one place (as sokol's _sg_desc_defaults): vs_train_query_desc returns the
   result, vs_parallelize and vs_train_reconfigure make the training state from
   it. fn names the caller in messages. */
_VS_HL_PRIVATE vs_result _vs_hl_resolve(const vs_train_desc* in, vs_train_desc* out, const char* fn)
{
    vs_train_desc z;
    memset(&z, 0, sizeof z);
    const vs_train_desc* d = in ? in : &z;
    if (!isfinite(d->clip) || d->clip < 0)
        return vs_set_error(VS_ERR_INVALID, "%s: desc.clip = %g (finite and >= 0; 0: no clipping)", fn, d->clip);
    if (d->accumulate < 0 || d->accumulate > 1 << 20)
        return vs_set_error(VS_ERR_INVALID, "%s: desc.accumulate = %d (0 or 1: none; else the calls a step takes, at "
                            "most 2^20)", fn, d->accumulate);
    if ((int)d->nonfinite < 0 || d->nonfinite > VS_NONFINITE_ERROR)
        return vs_set_error(VS_ERR_INVALID, "%s: desc.nonfinite = %d (VS_NONFINITE_SKIP or VS_NONFINITE_ERROR)", fn,
                            (int)d->nonfinite);
    *out = *d;
    if (out->lr.lr == 0 && out->lr.kind == VS_LR_CONSTANT) out->lr.lr = 1e-3;
    vs_result r = vs_lr_check(&out->lr);
    if (r) return vs_set_error(r, "%s: %s", fn, vs_last_error());
    if (out->accumulate == 0) out->accumulate = 1;
    vs_ddp_desc dd; // the optimizer's defaults are DDP's
    memset(&dd, 0, sizeof dd);
    dd.optim = out->optim;
    _vs_ddp_desc_defaults(&dd);
    out->optim = dd.optim;
    if ((r = _vs_ddp_optim_check(&out->optim))) { // (as vs_parallelize's DDP will; its text less "vs_ddp_init: ")
        const char* e = vs_last_error();
        return vs_set_error(r, "%s: desc.%s", fn, strncmp(e, "vs_ddp_init: ", 13) ? e : e + 13);
    }
    vs_loss_scale* ls = &out->loss_scale;
    if (ls->init == 0) ls->init = 65536;
    if (ls->growth == 0) ls->growth = 2;
    if (ls->backoff == 0) ls->backoff = 0.5;
    if (ls->interval == 0) ls->interval = 2000;
    if (ls->enable < -1 || ls->enable > 1)
        return vs_set_error(VS_ERR_INVALID, "%s: desc.loss_scale.enable = %d (0 auto, 1 on, -1 off)", fn, ls->enable);
    if (!isfinite(ls->init) || ls->init <= 0 || !isfinite(ls->growth) || ls->growth <= 1 ||
        !(ls->backoff > 0 && ls->backoff < 1) || ls->interval < 1)
        return vs_set_error(VS_ERR_INVALID, "%s: desc.loss_scale: init %g (> 0), growth %g (> 1), backoff %g (in (0, "
                            "1)), interval %d (>= 1)", fn, ls->init, ls->growth, ls->backoff, ls->interval);
    if (ls->enable == 0) { // on for f16 models
        int f16 = 0;
        const vs_model_desc* m = out->model;
        for (int l = 0; m && m->layers && l < m->nlayers; l++)
            for (int i = 0; i < m->layers[l].nparams && i < VS_LAYER_MAX_PARAMS; i++)
                f16 |= _vs_hl_dt(&m->layers[l].params[i]) == VS_F16;
        ls->enable = f16 ? 1 : -1;
    }
    return VS_OK;
}

VS_API vs_result vs_train_query_desc(const vs_train_desc* desc, vs_train_desc* out)
{
    if (!out) return vs_set_error(VS_ERR_NULL, "vs_train_query_desc: out is NULL");
    return _vs_hl_resolve(desc, out, "vs_train_query_desc");
}

/* The (PP, DP, TP) mesh (`mesh`, or a new one over the world), its submeshes
   and this rank's place; on GPUs the compute stream, the loss's device scalar
   and the kernels. */
_VS_HL_PRIVATE vs_result _vs_hl_open_mesh(vs_train* t, vs_mesh* mesh, const char* fn)
{
    vs_result r = VS_OK;
    vs_mesh_desc md;
    memset(&md, 0, sizeof md);
    const int S = _vs_hl_shard(&t->plan); // HSDP: PP x DPR x DPS x TP (the DDP finds DPR and DPS by name)
    md.shape[0] = t->pp, md.shape[1] = S ? t->dp / S : t->dp, md.shape[2] = S ? S : t->tp, md.shape[3] = t->tp;
    md.dim_names[0] = "PP", md.dim_names[1] = S ? "DPR" : "DP", md.dim_names[2] = S ? "DPS" : "TP";
    md.dim_names[3] = S ? "TP" : NULL;
    if (!S) md.shape[3] = 0;
    t->tpdim = S ? 3 : 2;
    if (mesh) t->mesh = mesh; // (checked by vs_train_reconfigure)
    else r = vs_mesh_init(t->w, &md, &t->mesh);
    if (!r && t->tp > 1) r = vs_mesh_submesh(t->mesh, "TP", &t->tpm);
    if (!r && t->dp > 1) r = vs_mesh_submesh(t->mesh, S ? "DPR,DPS" : "DP", &t->dpm); // (rank: DPR * DPS-size + DPS)
    if (!r && t->pp > 1) r = vs_mesh_submesh(t->mesh, "PP", &t->ppm);
    if (!r) {
        t->stage = vs_mesh_coord_along(t->mesh, "PP");
        t->dp_rank = t->dpm ? vs_mesh_rank(t->dpm) : 0;
    }
#ifdef VESCALE_NCCL
    t->dev = !r && vs_comm_device(vs_world_comm(t->w)) == 1;
    if (t->dev) {
        cudaError_t e = cudaSuccess;
        t->stream = t->desc.stream;
        if (!t->stream) {
            cudaStream_t st = NULL;
            e = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
            t->stream = st, t->own_stream = e == cudaSuccess;
        }
        cudaEvent_t ev = NULL;
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
        t->ev = ev;
        if (e != cudaSuccess) r = vs_cuda_error((int)e, fn, "the compute stream and an event");
        t->loss_carrier = !r && t->stage == 0 && vs_mesh_coord_along(t->mesh, "TP") == 0;
        if (!r && !(t->dloss = (double*)vs_device_alloc(t->w, 2 * sizeof(double)))) // (a step's, an evaluation's)
            r = vs_set_error(VS_ERR_NOMEM, "%s: out of device memory", fn);
        if (!r) r = vs_kernels_get(&_vs_hl_text, fn, t->k);
        if (!r && t->tpm) r = vs_comm_set_stream(vs_mesh_comm(t->tpm), t->stream);
    }
#else
    (void)fn;
#endif
    return r;
}

/* The pipeline units (vescale's user pointers, its backward wrappers) and the
   split into stages. */
_VS_HL_PRIVATE vs_result _vs_hl_split_units(vs_train* t, const char* fn)
{
    const vs_model_desc* m = t->model;
    const vs_plan* pl = &t->plan;
    const int L = m->nlayers;
    vs_world* w = t->w;
    t->units = (vs_pipe_unit*)vs_alloc(w, sizeof(vs_pipe_unit) * (size_t)L);
    t->lay = (_vs_hl_layer*)vs_alloc(w, sizeof(_vs_hl_layer) * (size_t)L);
    t->prm = (_vs_hl_param*)vs_alloc(w, sizeof(_vs_hl_param) * (size_t)L * VS_LAYER_MAX_PARAMS);
    t->layer_prm = (int*)vs_alloc(w, sizeof(int) * (size_t)L * VS_LAYER_MAX_PARAMS);
    if (!t->units || !t->lay || !t->prm || !t->layer_prm) return vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
    memset(t->lay, 0, sizeof(_vs_hl_layer) * (size_t)L);
    for (int l = 0; l < L; l++) {
        const vs_pipe_unit* u = &m->layers[l].unit;
        t->units[l] = *u;
        t->units[l].user = &t->lay[l].ctx;
        t->units[l].recompute = u->recompute || _vs_hl_recomputes(pl, u->name);
        // backward parts go through vescale first: it hands them the gradient views of this pass
        t->units[l].backward = u->backward ? _vs_hl_bwd : NULL;
        t->units[l].backward_input = u->backward_input ? _vs_hl_bwd_input : NULL;
        t->units[l].backward_weight = u->backward_weight ? _vs_hl_bwd_weight : NULL;
        t->lay[l].t = t;
        t->lay[l].ctx.user = m->layers[l].user;
        t->lay[l].ctx.tp = t->tpm;
        t->lay[l].ctx.tp_size = t->tp;
        t->lay[l].ctx.tp_rank = t->tpm ? vs_mesh_rank(t->tpm) : 0;
        t->lay[l].ctx.sp = pl->sequence_parallel && t->tp > 1;
    }
    vs_pipe_split_desc sd;
    memset(&sd, 0, sizeof sd);
    sd.stages = t->pp;
    sd.chunks = _vs_hl_chunks(pl);
    sd.kind = _vs_hl_split(pl);
    if (sd.kind == VS_PIPE_SPLIT_FLOPS) { // a model without flops splits uniformly
        int any = 0;
        for (int l = 0; l < L; l++) any |= m->layers[l].unit.flops > 0;
        if (!any) sd.kind = VS_PIPE_SPLIT_UNIFORM;
    }
    sd.points = pl->split_points[0] ? pl->split_points : NULL;
    sd.schedule = _vs_hl_sched(pl); // (the split takes the placement the schedule needs)
    return vs_pipe_split(t->units, L, &sd, &t->pplan);
}

/* The parameters, unique by name (a tied one is used by several layers), and
   where they are used: which chunks, whether on another stage, this stage's
   first user. */
_VS_HL_PRIVATE vs_result _vs_hl_index_params(vs_train* t)
{
    const vs_model_desc* m = t->model;
    vs_result r = VS_OK;
    for (int l = 0; !r && l < m->nlayers; l++) {
        int st = 0, k = vs_pipe_unit_chunk(&t->pplan, l, &st);
        for (int i = 0; i < m->layers[l].nparams; i++) {
            const vs_param_decl* pd = &m->layers[l].params[i];
            int x = _vs_hl_find(t, pd->name);
            if (x < 0) {
                x = t->np++;
                _vs_hl_param* q = &t->prm[x];
                memset(q, 0, sizeof *q);
                q->d = pd;
                q->ddp = -1;
                q->chunk_lo = q->chunk_hi = -1;
                q->chunk_a = q->chunk_b = k;
                q->first_here = -1;
                r = vs_plan_placement(&t->plan, pd, &q->tp, NULL);
                int64_t n = 1;
                for (int e = 0; e < pd->ndim; e++) n *= pd->shape[e];
                t->model_bytes += n * (int64_t)vs_dtype_size(_vs_hl_dt(pd));
            }
            _vs_hl_param* q = &t->prm[x];
            if (t->pplan.chunk_stage[q->chunk_a] != st) q->tied_remote = 1;
            if (k < q->chunk_a) q->chunk_a = k;
            if (k > q->chunk_b) q->chunk_b = k;
            q->users++;
            if (st == t->stage) {
                if (q->first_here < 0) q->first_here = l, q->group = t->plan.zero == VS_ZERO_3 ? l + 1 : 0;
                if (q->chunk_lo < 0 || k < q->chunk_lo) q->chunk_lo = k;
                if (k > q->chunk_hi) q->chunk_hi = k;
            }
            t->layer_prm[l * VS_LAYER_MAX_PARAMS + i] = x;
        }
    }
    return r;
}

/* DDP over the whole mesh, for this stage's parameters. */
_VS_HL_PRIVATE vs_result _vs_hl_open_ddp(vs_train* t)
{
    vs_ddp_desc dd;
    memset(&dd, 0, sizeof dd);
    dd.mesh = t->mesh;
    dd.zero = t->plan.zero;
    t->zero = t->plan.zero;
    dd.optim = t->desc.optim;
    /* ZeRO-2 stages a bucket's gradient from its first backward until its
       layers' last microbatch's; a pipeline keeps every bucket of a chunk (and,
       V-shaped, of two) open across microbatches, so room for all of them. */
    dd.zero2_buffers = t->model->nlayers * VS_LAYER_MAX_PARAMS;
    dd.stream = t->stream; // (NULL on the host transports)
    dd.grad_fp32 = t->desc.grad_fp32;
    if (t->zero == VS_ZERO_3) { // (HSDP: the mesh's DPR and DPS dims, found by name)
        dd.reshard_after_forward = _vs_hl_reshard(&t->plan), dd.prefetch = _vs_hl_prefetch(&t->plan);
        dd.reshard_after_forward_set = dd.prefetch_set = 1;
    }
    vs_result r = vs_ddp_init(&dd, &t->ddp);
    if (!r) t->ddp->owner = _VS_HL_OWNER; // (vs_ddp_free(vs_train_ddp(t)) would leave t dangling)
    return r;
}

/* Parameter q into DDP: its shard's layout, its memory (the trainer's,
   desc.storage, or vescale's), its initial values drawn as that shard only
   (noinit: not drawn). *live: the host bytes held for initial values now (the
   peak goes to t->init_peak). */
_VS_HL_PRIVATE vs_result _vs_hl_add_param(vs_train* t, _vs_hl_param* q, int noinit, const char* fn, int64_t* live)
{
    vs_world* w = t->w;
    const vs_train_desc* d = &t->desc;
    vs_ddp_param_desc pdsc;
    memset(&pdsc, 0, sizeof pdsc);
    pdsc.name = q->d->name;
    vs_dtype pdt = _vs_hl_dt(q->d);
    size_t psz = vs_dtype_size(pdt);
    pdsc.dtype = pdt;
    pdsc.ndim = q->d->ndim;
    for (int e = 0; e < q->d->ndim; e++) pdsc.shape[e] = q->d->shape[e];
    pdsc.placements[t->tpdim] = q->tp;
    pdsc.ready_group = q->group;
    /* sequence parallelism: a TP-replicated parameter's gradient comes from
       this rank's rows only, a partial sum over TP that DDP completes */
    if (t->lay[0].ctx.sp && q->tp.kind == VS_PLACE_REPLICATE) pdsc.placements[t->tpdim] = vs_partial(VS_OP_SUM);
    pdsc.no_decay = q->d->no_decay;
    // the copy on the later stage is left out of the clip norm (counted once)
    pdsc.tied_copy = q->tied_remote && t->pplan.chunk_stage[q->chunk_b] == t->stage &&
                     t->pplan.chunk_stage[q->chunk_a] != t->stage;
    vs_dtensor dt;
    memset(&dt, 0, sizeof dt);
    dt.layout.mesh = t->mesh;
    dt.layout.p[t->tpdim] = q->tp;
    dt.dtype = pdt; // (drawn in f32 and rounded: vs_init_fill)
    dt.ndim = q->d->ndim;
    for (int e = 0; e < q->d->ndim; e++) dt.shape[e] = q->d->shape[e];
    vs_result r = vs_layout_local(&dt.layout, dt.ndim, dt.shape, vs_mesh_rank(t->mesh), q->lshape, q->loff);
    q->lnumel = 1;
    for (int e = 0; e < q->d->ndim; e++) q->lnumel *= q->lshape[e];
    size_t ib = (size_t)(q->lnumel ? q->lnumel : 1) * psz;
    void *init = NULL, *grad = NULL;
    if (!r && d->storage) { // the trainer's memory: initialized in place, used in place
        vs_dtype gdt = d->grad_fp32 && pdt != VS_F32 ? VS_F32 : pdt;
        r = d->storage(q->d->name, pdt, gdt, q->lnumel, &init, &grad, d->storage_user);
        if (r) r = vs_set_error(r, "%s: desc.storage for \"%s\": %s", fn, q->d->name, vs_last_error());
        else if (!init || !grad)
            r = vs_set_error(VS_ERR_NULL, "%s: desc.storage gave \"%s\" no %s", fn, q->d->name,
                             init ? "gradient" : "parameter");
    } else if (!r) {
        init = t->dev ? vs_device_alloc(w, ib) : vs_alloc(w, ib); // (on the device there)
        if (!init)
            r = vs_set_error(VS_ERR_NOMEM, "%s: %lld %s elements for \"%s\"", fn, (long long)q->lnumel,
                             vs_dtype_name(pdt), q->d->name);
    }
    if (!r) {
        *live += q->lnumel * (int64_t)psz; // (the shard, never the whole tensor)
        if (*live > t->init_peak) t->init_peak = *live;
        dt.data = init;
        vs_init_desc id = q->d->init;
        id.seed = t->model->seed;
        id.name = q->d->name;
        r = noinit ? VS_OK : vs_init_fill(&dt, &id);
        if (r) r = vs_set_error(r, "%s: init of \"%s\": %s", fn, q->d->name, vs_last_error());
    }
    if (d->storage)
        pdsc.storage = init, pdsc.grad_storage = grad;
    else
        pdsc.data = init;
    if (!r) r = vs_ddp_add_param(t->ddp, &pdsc, &q->ddp);
    if (!d->storage && t->dev)
        vs_device_free(w, init); // (vs_ddp_add_param copied it: a cudaMemcpy, done)
    else if (!d->storage)
        vs_free(w, init); // (the trainer's memory stays: DDP uses it)
    *live -= q->lnumel * (int64_t)psz;
    return r;
}

/* Each layer's views of its parameters' shards, and the scratch gradients of
   a parameter a layer shares: another stage's part of a tied one (device), a
   later user's on this stage. */
_VS_HL_PRIVATE vs_result _vs_hl_layer_views(vs_train* t, const char* fn)
{
    const vs_model_desc* m = t->model;
    vs_world* w = t->w;
    vs_result r = VS_OK;
    for (int l = 0; !r && l < m->nlayers; l++)
        for (int i = 0; i < m->layers[l].nparams; i++) {
            _vs_hl_param* q = &t->prm[t->layer_prm[l * VS_LAYER_MAX_PARAMS + i]];
            if (q->ddp < 0) continue;
            t->lay[l].ctx.dtype[i] = _vs_hl_dt(q->d);
            t->lay[l].ctx.grad_dtype[i] = vs_ddp_grad_dtype(t->ddp, q->ddp);
            if (t->dev && q->tied_remote && !q->rscratch) { // the other stage's part of a tied gradient
                size_t rb = (size_t)(q->lnumel ? q->lnumel : 1) * vs_dtype_size(vs_ddp_grad_dtype(t->ddp, q->ddp));
                if (!(q->rscratch = vs_device_alloc(w, rb))) {
                    r = vs_set_error(VS_ERR_NOMEM, "%s: out of device memory", fn);
                    break;
                }
            }
            if (q->first_here != l) { // a later user on this stage
                size_t sb = (size_t)(q->lnumel ? q->lnumel : 1) * vs_dtype_size(vs_ddp_grad_dtype(t->ddp, q->ddp));
                if (!q->scratch && !(q->scratch = t->dev ? vs_device_alloc(w, sb) : vs_alloc(w, sb))) {
                    r = vs_set_error(VS_ERR_NOMEM, "%s: out of %smemory", fn, t->dev ? "device " : "");
                    break;
                }
#ifdef VESCALE_NCCL
                if (t->dev) {
                    cudaError_t e = cudaMemsetAsync(q->scratch, 0, sb, (cudaStream_t)t->stream);
                    if (e != cudaSuccess) r = vs_cuda_error((int)e, fn, "zeroing a tied gradient's scratch");
                } else
#endif
                    memset(q->scratch, 0, sb);
            }
            for (int e = 0; e < VS_TENSOR_MAX_DIMS; e++)
                t->lay[l].ctx.local_shape[i][e] = q->lshape[e], t->lay[l].ctx.offset[i][e] = q->loff[e];
        }
    return r;
}

/* The pipeline engine over the units, with vescale's data and hooks, and the
   plan's schedule. */
_VS_HL_PRIVATE vs_result _vs_hl_open_pipe(vs_train* t)
{
    vs_pipe_desc pd;
    memset(&pd, 0, sizeof pd);
    pd.mesh = t->mesh;
    pd.units = t->units;
    pd.nunits = t->model->nlayers;
    pd.plan = &t->pplan;
    pd.data = _vs_hl_data;
    pd.data_user = t;
    pd.loss = VS_PIPE_LOSS_MEAN;
    pd.on_step = _vs_hl_on_step;
    pd.hook_user = t;
    pd.on_unit = _vs_hl_on_unit, pd.unit_user = t; // (gradients ready a layer at a time; ZeRO-3's gathers)
    pd.stream = t->stream; // (NULL on the host transports)
    pd.fixed_shapes = t->dev && !t->desc.variable_shapes;
    pd.defer_loss = t->dev; // (the loss is read with the norm: one host wait a step)
    vs_result r = vs_pipe_init(&pd, &t->pipe);
    if (!r) t->pipe->owner = _VS_HL_OWNER;
    if (!r) r = vs_pipe_generate(t->w, _vs_hl_sched(&t->plan), t->pp, t->pplan.chunks, t->M, &t->sched);
    return r;
}

_VS_HL_PRIVATE vs_result _vs_hl_make(vs_world* w, const vs_train_desc* d, vs_mesh* mesh, int noinit, const char* fn,
                                     vs_train** out)
{
    if (!out) return vs_set_error(VS_ERR_NULL, "%s: out is NULL", fn);
    *out = NULL;
    if (!w || !d || !d->plan) return vs_set_error(VS_ERR_NULL, "%s: %s is NULL", fn, !w ? "world" : !d ? "desc" : "desc.plan");
    _VS_TRY(vs_plan_check(d->plan, d->model));
    if (d->plan->zero == VS_ZERO_3 && d->storage)
        return vs_set_error(VS_ERR_UNSUPPORTED, "%s: plan zero 3 with desc.storage: ZeRO-3 keeps only the owned shard "
                            "of each parameter, in its own memory (use zero 1 or 2 with trainer-owned storage)", fn);
    vs_train_desc rd; // resolved
    memset(&rd, 0, sizeof rd);
    _VS_TRY(_vs_hl_resolve(d, &rd, fn));
    const vs_plan* pl = d->plan;
    int pp = _vs_hl_sz(pl->pp), dp = _vs_hl_sz(pl->dp), tp = _vs_hl_sz(pl->tp);
    if (!mesh && pp * dp * tp != vs_world_size(w))
        return vs_set_error(VS_ERR_MISMATCH, "%s: the plan's mesh PP=%d x DP=%d x TP=%d is %d ranks, the world has %d", fn,
                            pp, dp, tp, pp * dp * tp, vs_world_size(w));
    vs_train* t = (vs_train*)vs_alloc(w, sizeof *t);
    if (!t) return vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
    memset(t, 0, sizeof *t);
    t->magic = _VS_HL_LIVE;
    t->grad_norm = NAN;
    t->w = w;
    t->model = d->model;
    t->desc = rd;
    t->plan = *pl;
    t->pp = pp, t->dp = dp, t->tp = tp;
    t->M = _vs_hl_mbs(pl);
    t->ls = rd.loss_scale;
    t->ls.enable = rd.loss_scale.enable == 1;
    t->scale = t->ls.enable ? t->ls.init : 1.0;
    vs_result r = _vs_hl_open_mesh(t, mesh, fn);
    if (!r) r = _vs_hl_split_units(t, fn);
    if (!r) r = _vs_hl_index_params(t);
    if (!r) r = _vs_hl_open_ddp(t);
    int64_t live = 0;
    for (int pass = 0; pass < 2 && !r; pass++) // tied ones first: their bucket reduces last
        for (int x = 0; x < t->np && !r; x++)
            if (t->prm[x].chunk_lo >= 0 && t->prm[x].tied_remote == (pass == 0))
                r = _vs_hl_add_param(t, &t->prm[x], noinit, fn, &live);
    if (!r) r = vs_ddp_finalize(t->ddp);
    if (!r) r = _vs_hl_layer_views(t, fn);
    if (!r) r = _vs_hl_open_pipe(t);
    if (r) {
        char msg[600];
        size_t ml = strlen(vs_last_error());
        if (ml >= sizeof msg) ml = sizeof msg - 1;
        memcpy(msg, vs_last_error(), ml);
        msg[ml] = 0;
        if (mesh) t->mesh = NULL; // (the caller's again)
        vs_train_free(t);
        return vs_set_error(r, "%s%s%s", strncmp(msg, fn, strlen(fn)) ? fn : "", strncmp(msg, fn, strlen(fn)) ? ": " : "",
                            msg);
    }
    *out = t;
    return VS_OK;
}

VS_API vs_result vs_train_step(vs_train* t, const vs_batch* batch, double* loss)
{
    vs_train_stats st;
    vs_result r = vs_train_step_ex(t, batch, &st);
    if (loss) *loss = st.loss;
    return r;
}

/* One call of vs_train_step_ex after its checks (the caller fills the stats'
   counts and times). */
_VS_HL_PRIVATE vs_result _vs_hl_step(vs_train* t, const vs_batch* batch, vs_train_stats* st);

VS_API vs_result vs_train_step_ex(vs_train* t, const vs_batch* batch, vs_train_stats* stats)
{
    vs_train_stats st;
    memset(&st, 0, sizeof st);
    st.loss = st.grad_norm = st.lr = NAN;
    double t0 = _vs_now();
    vs_result r = _vs_hl_step(t, batch, &st);
    if (t && !_VS_HL_GONE("vs_train_step", t)) {
        st.t_total = _vs_now() - t0;
        st.steps = vs_ddp_step_count(t->ddp);
        st.skipped = t->skipped;
        if (st.stepped && !r && vs_world_rank(t->w) == 0) {
            double span = _vs_now() - t->acc_t0, tps = span > 0 ? (double)t->acc_tokens / span : 0;
            vs_log(t->w, VS_LOG_INFO, "step %lld | loss %.4f | gnorm %.2f | lr %.1e | %.1fk tok/s | %.0f ms%s",
                   (long long)(st.steps + st.skipped), st.loss, st.grad_norm, st.lr, tps / 1e3, span * 1e3,
                   st.skipped_step ? " | skipped" : "");
        }
    }
    if (stats) *stats = st;
    return r;
}

/* The layers' parameter pointers, current (after a ZeRO step: its all-gather
   completed; ZeRO-3: bound by the unit hook around each part, NULL here), and
   their gradients asked for again when a backward needs them. */
_VS_HL_PRIVATE vs_result _vs_hl_bind(vs_train* t)
{
    for (int l = 0; l < t->model->nlayers; l++)
        for (int i = 0; i < t->model->layers[l].nparams; i++) {
            const _vs_hl_param* q = &t->prm[t->layer_prm[l * VS_LAYER_MAX_PARAMS + i]];
            t->lay[l].ctx.param[i] = q->ddp < 0 || t->zero == VS_ZERO_3 ? NULL : vs_ddp_param(t->ddp, q->ddp);
            t->lay[l].ctx.grad[i] = NULL;
            if (q->ddp >= 0 && t->zero != VS_ZERO_3 && !t->lay[l].ctx.param[i]) return VS_ERR_STATE;
        }
    return VS_OK;
}

/* The batch checks of vs_train_step and vs_train_eval; *rows_out: its rows. */
_VS_HL_PRIVATE vs_result _vs_hl_batch(vs_train* t, const vs_batch* batch, const char* fn, int64_t* rows_out)
{
    _VS_TRY(_VS_HL_GONE(fn, t));
    if (!t || !batch) return vs_set_error(VS_ERR_NULL, "%s: %s is NULL", fn, t ? "batch" : "train");
    if (batch->n < 1 || batch->n > VS_BATCH_MAX) return vs_set_error(VS_ERR_INVALID, "%s: batch.n = %d", fn, batch->n);
    int64_t rows = batch->shape[0][0];
    for (int i = 0; i < batch->n; i++) {
        if (!batch->name[i] || !batch->data[i] || batch->ndim[i] < 1 || batch->ndim[i] > VS_PIPE_MAX_DIMS)
            return vs_set_error(VS_ERR_INVALID, "%s: batch input %d is incomplete (name, data, ndim)", fn, i);
        if (batch->shape[i][0] != rows)
            return vs_set_error(VS_ERR_MISMATCH, "%s: batch inputs \"%s\" and \"%s\" have %lld and %lld rows", fn,
                                batch->name[0], batch->name[i], (long long)rows, (long long)batch->shape[i][0]);
        for (int j = 0; j < i; j++)
            if (!strcmp(batch->name[j], batch->name[i]))
                return vs_set_error(VS_ERR_INVALID, "%s: batch input \"%s\" twice (inputs %d and %d)", fn,
                                    batch->name[i], j, i);
        size_t sz = vs_dtype_size(batch->dtype[i]), row = sz;
        if (!sz)
            return vs_set_error(VS_ERR_INVALID, "%s: batch input \"%s\": dtype %d", fn, batch->name[i], (int)batch->dtype[i]);
        for (int d = 1; d < batch->ndim[i]; d++) { // a row's bytes, and the batch's, must fit a size_t
            int64_t e = batch->shape[i][d];
            if (e < 0 || (e && row > SIZE_MAX / (size_t)e))
                return vs_set_error(VS_ERR_INVALID, "%s: batch input \"%s\": shape[%d] = %lld", fn, batch->name[i], d,
                                    (long long)e);
            row *= (size_t)e;
        }
        if (rows > 0 && row > SIZE_MAX / (size_t)rows)
            return vs_set_error(VS_ERR_INVALID, "%s: batch input \"%s\": %lld rows of %zu bytes overflow", fn,
                                batch->name[i], (long long)rows, row);
    }
    // every data input the model takes, refused here on every rank alike, not by the one stage that reads it
    // (mid-schedule: a job abort); the pipe's tensor table holds the whole model's on every stage
    for (int id = 0; t->pipe && id < t->pipe->ntensors; id++) {
        const char* want = t->pipe->t[id].name;
        int in = t->pipe->t[id].producer >= 0;
        for (int i = 0; i < batch->n && !in; i++) in = !strcmp(batch->name[i], want);
        if (in) continue;
        char have[256];
        int len = 0;
        for (int i = 0; i < batch->n && len < (int)sizeof have; i++)
            len += snprintf(have + len, sizeof have - (size_t)len, "%s\"%s\"", i ? ", " : "", batch->name[i]);
        return vs_set_error(VS_ERR_INVALID, "%s: the batch has no \"%s\", which the model takes (it has %s)", fn, want,
                            have);
    }
    if (batch->dp_local < 0 || (batch->dp_local > 1 && batch->dp_local != t->dp))
        return vs_set_error(batch->dp_local < 0 ? VS_ERR_INVALID : VS_ERR_MISMATCH, "%s: batch.dp_local = %d: the batch "
                            "holds one DP rank's rows of DP=%d, this training state has DP=%d (0: the global batch)", fn,
                            batch->dp_local, batch->dp_local, t->dp);
    if (batch->dp_local > 1) rows *= t->dp; // (this DP rank's rows: the global batch has DP times as many)
    if (rows < 1)
        return vs_set_error(VS_ERR_INVALID, "%s: the batch has %lld rows (at least DP=%d x %d microbatches)", fn,
                            (long long)rows, t->dp, t->M);
    if (rows % ((int64_t)t->dp * t->M))
        return vs_set_error(VS_ERR_INVALID, "%s: %lld rows do not split into DP=%d x %d microbatches", fn, (long long)rows,
                            t->dp, t->M);
    if (t->dev && !t->desc.variable_shapes) { // the pipeline's fixed shapes: the first step's batch, every step
        if (!t->shape0[0][0])
            for (int i = 0; i < batch->n; i++)
                for (int d = 0; d < batch->ndim[i]; d++) t->shape0[i][d] = batch->shape[i][d];
        for (int i = 0; i < batch->n; i++)
            for (int d = 0; d < batch->ndim[i]; d++)
                if (batch->shape[i][d] != t->shape0[i][d])
                    return vs_set_error(VS_ERR_MISMATCH, "%s: batch input \"%s\" has %lld in dim %d, the first step's "
                                        "had %lld: on GPUs every step's batch has the first one's shape unless "
                                        "vs_train_desc.variable_shapes", fn, batch->name[i],
                                        (long long)batch->shape[i][d], d, (long long)t->shape0[i][d]);
    }
    *rows_out = rows;
    return VS_OK;
}

VS_API vs_result vs_train_eval(vs_train* t, const vs_batch* batch, double* loss)
{
    const char* fn = "vs_train_eval";
    int64_t rows = 0;
    _VS_TRY(_vs_hl_batch(t, batch, fn, &rows));
    if (!loss) return vs_set_error(VS_ERR_NULL, "%s: loss is NULL", fn);
    *loss = NAN;
    if (!t->esched) _VS_TRY(vs_pipe_sched_forward(t->sched, &t->esched));
    int64_t rows_dp = t->rows_dp, rows_mb = t->rows_mb; // (a step's, between its accumulating calls)
    t->rows_dp = rows / t->dp;
    t->rows_mb = t->rows_dp / t->M;
    t->batch = batch, t->batch_fn = fn;
    double l = 0;
    vs_result r = _vs_hl_bind(t);
    if (!r) r = vs_pipe_run(t->pipe, t->esched, t->dev ? NULL : &l);
    t->batch = NULL;
    t->rows_dp = rows_dp, t->rows_mb = rows_mb;
#ifdef VESCALE_NCCL
    if (!r && t->dev) { // the DP mean on the device, then the one host wait
        double* d = t->dloss + 1;
        vs_work* wk = NULL;
        r = _vs_hl_loss_device(t, d, 0, fn);
        if (!r && t->dpm) {
            vs_comm* dc = vs_mesh_comm(t->dpm);
            r = _vs_hl_fence(t, dc, fn);
            if (!r) r = vs_all_reduce(dc, d, d, 1, VS_F64, VS_OP_AVG, &wk);
            if (!r) r = vs_wait_stream(wk, t->stream);
        }
        if (!r) r = vs_sync_stream(vs_mesh_comm(t->mesh), t->stream); // (the wait, with the deadline)
        cudaError_t e = r ? cudaSuccess : cudaMemcpyAsync(&l, d, sizeof l, cudaMemcpyDeviceToHost, (cudaStream_t)t->stream);
        if (e != cudaSuccess) r = vs_cuda_error((int)e, fn, "the loss to the host");
    } else
#endif
    if (!r && t->dpm) r = vs_all_reduce(vs_mesh_comm(t->dpm), &l, &l, 1, VS_F64, VS_OP_AVG, NULL);
    if (r) return vs_set_error(r, "%s: %s", fn, vs_last_error());
    *loss = l;
    return VS_OK;
}

_VS_HL_PRIVATE vs_result _vs_hl_step(vs_train* t, const vs_batch* batch, vs_train_stats* st)
{
    const char* fn = "vs_train_step";
    int64_t rows = 0;
    _VS_TRY(_vs_hl_batch(t, batch, fn, &rows));
    int nacc = t->desc.accumulate > 1 ? t->desc.accumulate : 1, first = t->acc_n == 0, last = t->acc_n + 1 >= nacc;
    if (!first && rows != t->rows_dp * t->dp)
        return vs_set_error(VS_ERR_MISMATCH, "%s: call %d of a step's %d (vs_train_desc.accumulate) has %lld rows, the "
                            "step's first had %lld", fn, t->acc_n + 1, nacc, (long long)rows,
                            (long long)(t->rows_dp * t->dp));
    int64_t tokens = rows;
    for (int d = 1; d < batch->ndim[0]; d++) tokens *= batch->shape[0][d];
    st->tokens = tokens;
    st->accumulated = t->acc_n + 1;
    if (first) t->acc_tokens = 0, t->acc_loss = 0, t->acc_t0 = _vs_now();
    t->acc_tokens += tokens;
    t->rows_dp = rows / t->dp;
    t->rows_mb = t->rows_dp / t->M;
    t->batch = batch, t->batch_fn = fn;
    vs_result r = first ? vs_ddp_zero_grad(t->ddp) : VS_OK; // (accumulating: the earlier calls' gradients stay)
    if (!r) r = _vs_hl_bind(t);
    double l = 0, norm = NAN;
    int64_t steps = vs_ddp_step_count(t->ddp), step = steps + t->skipped; // (the batches taken before this one)
    st->loss_scale = t->scale;
    /* accumulating: every call seeds 1/nacc, so the calls' gradients add up to
       their mean; the calls before the last do not reduce (ZeRO-2 reduces each
       into its owned range: it keeps no full gradients to add into; ZeRO-3 too) */
    if (!r && (t->ls.enable || nacc > 1)) r = vs_pipe_set_loss_scale(t->pipe, t->scale / nacc);
    if (!r && nacc > 1 && t->zero < VS_ZERO_2) r = vs_ddp_set_sync(t->ddp, last);
    double tc = _vs_now();
    t->z3_time = 0, t->z3_gathers = 0;
    if (!r) r = vs_pipe_run(t->pipe, t->sched, t->dev ? NULL : &l); // (hooks: gradient sync as chunks finish)
    st->t_compute = _vs_now() - tc;
    st->t_gather = t->z3_time, st->gathers = t->z3_gathers;
    if (!r) vs_pipe_last_memory(t->pipe, &st->act_peak);
    tc = _vs_now();
    t->batch = NULL;
    if (!r) r = vs_ddp_finish_grad_sync(t->ddp);
    // the loss first: the caller gets it for a step skipped or failed below too
    int dloss = 0; // device: the mean is in t->dloss, read with the norm
#ifdef VESCALE_NCCL
    if (!r && t->dev) {
        r = _vs_hl_loss_device(t, t->dloss, !first, fn); // (read with the norm below; accumulating: added up)
        dloss = 1;
    }
#endif
    if (!r && !last) { // accumulating: the step goes on with the next call
        t->acc_loss += l;
        t->acc_n++;
        st->t_comm = _vs_now() - tc;
        return VS_OK;
    }
    t->acc_n = 0;
    if (r) return vs_set_error(r, "%s (step %lld): %s", fn, (long long)step, vs_last_error());
    l = (t->acc_loss + l) / nacc; // (nacc 1: l)
    if (!dloss && t->dpm) r = vs_all_reduce(vs_mesh_comm(t->dpm), &l, &l, 1, VS_F64, VS_OP_AVG, NULL);
    st->stepped = 1;
    if (!r) { // the global norm, clipping or not: non-finite gradients anywhere make it non-finite everywhere
        vs_clip_desc cd;
        memset(&cd, 0, sizeof cd);
        cd.max_norm = t->desc.clip; // (0: only measures)
        cd.error_if_nonfinite = t->desc.nonfinite == VS_NONFINITE_ERROR && !t->ls.enable; // (scaling: overflows skip)
        cd.unscale = t->ls.enable ? t->scale : 0;
        double lsum = 0;
#ifdef VESCALE_NCCL
        if (dloss) cd.carry = t->loss_carrier ? t->dloss : NULL, cd.ncarry = 1, cd.carry_out = &lsum;
#endif
        r = vs_ddp_clip_grad_norm_ex(t->ddp, &cd, &norm);
        if (dloss) l = lsum / t->dp / nacc; // (the carriers' losses summed: one a DP replica)
        t->grad_norm = norm;
    }
    st->t_comm = _vs_now() - tc;
    st->loss = l, st->grad_norm = norm, st->lr = vs_lr_at(&t->desc.lr, steps);
    st->clipped = t->desc.clip > 0 && isfinite(norm) && norm > t->desc.clip;
    if (r == VS_ERR_NONFINITE) { // every rank: the norm is the same on all
        const char* where = strstr(vs_last_error(), " (on this rank first in '");
        char at[200] = "";
        if (where) snprintf(at, sizeof at, "%.*s", (int)(strcspn(where + 1, ")") + 2), where);
        return vs_set_error(r, "%s (step %lld): the global gradient norm is %g, not finite%s; with the policy error "
                               "(vs_train_desc.nonfinite) the step fails: parameters, optimizer state and the step "
                               "count are as they were", fn, (long long)step, norm, at);
    }
    int skip = !r && !isfinite(norm); // (vs_ddp_step skips on every rank)
    tc = _vs_now();
    if (!r) r = vs_ddp_step(t->ddp, vs_lr_at(&t->desc.lr, steps));
    st->t_optim = _vs_now() - tc;
    st->skipped_step = skip;
    if (r) return vs_set_error(r, "%s (step %lld): %s", fn, (long long)step, vs_last_error());
    if (skip) {
        t->skipped++;
        if (t->ls.enable) {
            double was = t->scale;
            t->scale *= t->ls.backoff, t->good = 0;
            vs_log(t->w, VS_LOG_WARN,
                   "vs_train_step (step %lld): the gradients overflowed at loss scale %g (norm %g): step skipped, "
                   "parameters, optimizer state and the LR schedule as they were; loss scale now %g (%lld skipped so far)",
                   (long long)step, was, norm, t->scale, (long long)t->skipped);
        } else
            vs_log(t->w, VS_LOG_WARN,
                   "vs_train_step (step %lld): the global gradient norm is %g, not finite: step skipped, parameters, "
                   "optimizer state and the LR schedule as they were (%lld skipped so far; vs_train_desc.nonfinite: "
                   "skip)", (long long)step, norm, (long long)t->skipped);
    } else if (t->ls.enable && ++t->good >= t->ls.interval) {
        t->scale *= t->ls.growth, t->good = 0;
    }
    if (t->data) _vs_data_pos(t->data, t->step_pos), t->has_step_pos = 1; // (the batches the state has taken)
    return VS_OK;
}

VS_API int64_t vs_train_steps(const vs_train* t)
{
    if (!t) return vs_set_error(VS_ERR_INVALID, "vs_train_steps: train is NULL"); // (-1, as documented)
    _VS_TRY(_VS_HL_GONE("vs_train_steps", t));
    return vs_ddp_step_count(t->ddp);
}
VS_API int64_t vs_train_skipped_steps(const vs_train* t)
{
    if (!t) return vs_set_error(VS_ERR_NULL, "vs_train_skipped_steps: train is NULL");
    _VS_TRY(_VS_HL_GONE("vs_train_skipped_steps", t));
    return t->skipped;
}
VS_API double vs_train_loss_scale(const vs_train* t)
{
    if (!t) return vs_set_error(VS_ERR_NULL, "vs_train_loss_scale: train is NULL"), (double)NAN;
    if (_VS_HL_GONE("vs_train_loss_scale", t)) return NAN;
    return t->scale;
}
VS_API double vs_train_grad_norm(const vs_train* t)
{
    if (!t) return vs_set_error(VS_ERR_NULL, "vs_train_grad_norm: train is NULL"), (double)NAN;
    if (_VS_HL_GONE("vs_train_grad_norm", t)) return NAN;
    return t->grad_norm;
}
VS_API vs_mesh* vs_train_mesh(vs_train* t)
{
    if (!t) return vs_set_error(VS_ERR_NULL, "vs_train_mesh: train is NULL"), (vs_mesh*)NULL;
    if (_VS_HL_GONE("vs_train_mesh", t)) return NULL;
    return t->mesh;
}
VS_API vs_pipe* vs_train_pipe(vs_train* t)
{
    if (!t) return vs_set_error(VS_ERR_NULL, "vs_train_pipe: train is NULL"), (vs_pipe*)NULL;
    if (_VS_HL_GONE("vs_train_pipe", t)) return NULL;
    return t->pipe;
}
VS_API vs_ddp* vs_train_ddp(vs_train* t)
{
    if (!t) return vs_set_error(VS_ERR_NULL, "vs_train_ddp: train is NULL"), (vs_ddp*)NULL;
    if (_VS_HL_GONE("vs_train_ddp", t)) return NULL;
    return t->ddp;
}

VS_API vs_result vs_train_memory(const vs_train* t, int64_t* init_peak, int64_t* model_bytes)
{
    _VS_TRY(_VS_HL_GONE("vs_train_memory", t));
    if (!t) return vs_set_error(VS_ERR_NULL, "vs_train_memory: train is NULL");
    if (init_peak) *init_peak = t->init_peak;
    if (model_bytes) *model_bytes = t->model_bytes;
    return VS_OK;
}

/* The global value of a parameter: a stage that holds it all-gathers its TP
   shards, then the stage of its first use broadcasts it along PP. */
VS_API vs_result vs_train_get_param(vs_train* t, const char* name, void* out, size_t bytes)
{
    const char* fn = "vs_train_get_param";
    _VS_TRY(_VS_HL_GONE(fn, t));
    if (!t || !name || !out) return vs_set_error(VS_ERR_NULL, "%s: %s is NULL", fn, !t ? "train" : !name ? "name" : "out");
    int x = _vs_hl_find(t, name);
    if (x < 0) return vs_set_error(VS_ERR_INVALID, "%s: the model has no parameter \"%s\"", fn, name);
    const _vs_hl_param* q = &t->prm[x];
    int64_t n = 1;
    for (int e = 0; e < q->d->ndim; e++) n *= q->d->shape[e];
    vs_dtype pdt = _vs_hl_dt(q->d);
    size_t nb = (size_t)n * vs_dtype_size(pdt);
    if (bytes < nb)
        return vs_set_error(VS_ERR_INVALID, "%s: \"%s\" (%s) needs %zu bytes, got %zu", fn, name, vs_dtype_name(pdt), nb,
                            bytes);
    int owner = t->pplan.chunk_stage[q->chunk_a];
    vs_result r = VS_OK;
    void* host_out = out;
#ifdef VESCALE_NCCL
    // the last step's ZeRO gathers done first, with the deadline: a cudaMalloc beside a collective that waits for
    // its peers can deadlock (NCCL's guide; the stand-in's malloc-during-collective)
    if (t->dev && t->ddp) _VS_TRY(vs_ddp_synchronize(t->ddp));
    if (t->dev && !(out = vs_device_alloc(t->w, nb))) // staged on the device (NCCL's memory)
        return vs_set_error(VS_ERR_NOMEM, "%s: \"%s\": out of device memory for %lld floats", fn, name, (long long)n);
#endif
    if (q->ddp >= 0 && t->stage == owner) {
        vs_dtensor src, dst;
        memset(&src, 0, sizeof src);
        src.layout.mesh = t->mesh;
        src.layout.p[t->tpdim] = q->tp;
        src.dtype = pdt;
        src.ndim = q->d->ndim;
        for (int e = 0; e < q->d->ndim; e++) src.shape[e] = q->d->shape[e];
        dst = src;
        dst.layout.p[t->tpdim] = vs_replicate();
        if (q->group) r = vs_ddp_gather(t->ddp, q->group); // (ZeRO-3: collective over this stage's DP shard group)
        const int held = q->group && !r;
        src.data = r ? NULL : vs_ddp_param(t->ddp, q->ddp);
        dst.data = out;
        if (!r && !src.data) r = VS_ERR_STATE; // (vs_ddp_param said why)
        if (!r && t->tpm) { // gather along TP only: the other stages are not in this call
            src.layout.mesh = dst.layout.mesh = t->tpm;
            src.layout.p[0] = q->tp;
            dst.layout.p[0] = vs_replicate();
            src.layout.p[t->tpdim] = dst.layout.p[t->tpdim] = vs_replicate();
            r = vs_redistribute(&src, &dst); // (device: on the TP communicator's stream, the compute stream)
        }
#ifdef VESCALE_NCCL
        else if (!r && t->dev) {
            cudaError_t e = cudaMemcpyAsync(out, src.data, nb, cudaMemcpyDeviceToDevice, (cudaStream_t)t->stream);
            if (e != cudaSuccess) r = vs_cuda_error((int)e, fn, "copying the shard");
        }
#endif
        else if (!r) memcpy(out, src.data, nb);
        if (held) { // (device: the copy above is in stream order before the release's reuse)
            vs_result rr = vs_ddp_release(t->ddp, q->group);
            if (!r) r = rr;
        }
    }
    if (!r && t->pp > 1) {
        vs_mesh* ppm;
        r = vs_mesh_submesh(t->mesh, "PP", &ppm);
#ifdef VESCALE_NCCL
        if (!r && t->dev) r = _vs_hl_fence(t, vs_mesh_comm(ppm), fn); // after the copy above
#endif
        if (!r) r = vs_broadcast(vs_mesh_comm(ppm), out, out, (size_t)n, pdt, owner, NULL);
    }
#ifdef VESCALE_NCCL
    if (t->dev) { // to the caller's memory: after the compute stream, waited for with the deadline first (a
                  // pageable copy would wait without one, as long as a dead peer left the stream unfinished)
        if (!r) r = vs_sync_stream(vs_mesh_comm(t->mesh), t->stream);
        cudaError_t e = r ? cudaSuccess : cudaMemcpy(host_out, out, nb, cudaMemcpyDefault);
        if (e != cudaSuccess) r = vs_cuda_error((int)e, fn, "copying the parameter out");
        // (ZeRO-3: the gather above may have prefetched the next group's, which waits for its peers: done first,
        // with the deadline, so that the cudaFree does not synchronise the device beside it)
        vs_result rs = q->group && t->ddp ? vs_ddp_synchronize(t->ddp) : VS_OK;
        if (!r) r = rs;
        vs_device_free(t->w, out);
    }
#else
    (void)host_out;
#endif
    return r ? vs_set_error(r, "%s: \"%s\": %s", fn, name, vs_last_error()) : VS_OK;
}

/* Save and load: DDP's whole state (parameters, optimizer, step) through
   vescale_ckpt.h, plus the plan text and the caller's extra entries. */
_VS_HL_PRIVATE vs_result _vs_hl_ck(vs_train* t)
{
    if (t->ck) return VS_OK;
    vs_ckpt_desc cd;
    memset(&cd, 0, sizeof cd);
    cd.mesh = t->mesh;
    return vs_ckpt_init(&cd, &t->ck);
}

#define _VS_HL_PLAN_ENTRY "__plan"
#define _VS_HL_SKIPPED_ENTRY "__skipped" // vs_train_skipped_steps, an int64 (the steps taken are DDP's __step)
#define _VS_HL_SCALE_ENTRY "__loss_scale" // the loss scale (a double) and its good steps in a row (an int64)

/* mkdir -p of path's parent (every rank may: an existing directory is fine). */
_VS_HL_PRIVATE vs_result _vs_hl_mkdirs(const char* path)
{
    char p[4096];
    size_t n = strlen(path);
    if (n >= sizeof p) return vs_set_error(VS_ERR_INVALID, "vs_train_save: path is longer than %zu bytes", sizeof p - 1);
    memcpy(p, path, n + 1);
    char* end = strrchr(p, '/');
    if (!end || end == p) return VS_OK;
    *end = 0;
    for (char* c = p + 1;; c++) {
        int last = *c == 0;
        if (*c != '/' && !last) continue;
        *c = 0;
        struct stat st;
        if (mkdir(p, 0755) && errno != EEXIST && !(stat(p, &st) == 0 && S_ISDIR(st.st_mode)))
            return vs_set_error(VS_ERR_IO, "vs_train_save: cannot create the folder %s: %s", p, strerror(errno));
        if (last) return VS_OK;
        *c = '/';
    }
}

VS_API vs_result vs_train_save(vs_train* t, const char* path, const vs_ckpt_entry* extra, int nextra, int async)
{
    _VS_TRY(_VS_HL_GONE("vs_train_save", t));
    if (!t || !path) return vs_set_error(VS_ERR_NULL, "vs_train_save: %s is NULL", t ? "path" : "train");
    if (nextra < 0 || nextra > 60 || (nextra && !extra)) return vs_set_error(VS_ERR_INVALID, "vs_train_save: %d extra entries", nextra);
    if (async != 0 && async != 1) return vs_set_error(VS_ERR_INVALID, "vs_train_save: async = %d (0 or 1)", async);
    if (t->acc_n)
        return vs_set_error(VS_ERR_STATE, "vs_train_save: in the middle of a step (%d of its %d calls taken, "
                            "vs_train_desc.accumulate): save after the step's last call", t->acc_n, t->desc.accumulate);
    struct stat st; // (every rank sees the folder, as the checkpointer's own check assumes: no collective)
    if (lstat(path, &st) == 0)
        return vs_set_error(VS_ERR_STATE, "vs_train_save: %s exists (a checkpoint is never replaced: save under a new "
                            "name, or remove it first)", path);
    _VS_TRY(_vs_hl_mkdirs(path));
    _VS_TRY(_vs_hl_ck(t));
    char text[4096];
    int n = vs_plan_print(&t->plan, text, sizeof text);
    vs_ckpt_entry e[64];
    memset(e, 0, sizeof e);
    for (int i = 0; i < nextra; i++) e[i] = extra[i];
    e[nextra].name = _VS_HL_PLAN_ENTRY;
    e[nextra].kind = VS_CKPT_BLOB;
    e[nextra].blob = text;
    e[nextra].blob_bytes = (size_t)(n < (int)sizeof text ? n : (int)sizeof text - 1);
    int64_t skipped = t->skipped;
    e[nextra + 1].name = _VS_HL_SKIPPED_ENTRY;
    e[nextra + 1].kind = VS_CKPT_BLOB;
    e[nextra + 1].blob = &skipped;
    e[nextra + 1].blob_bytes = sizeof skipped;
    unsigned char sc[16];
    memcpy(sc, &t->scale, 8), memcpy(sc + 8, &t->good, 8);
    e[nextra + 2].name = _VS_HL_SCALE_ENTRY;
    e[nextra + 2].kind = VS_CKPT_BLOB;
    e[nextra + 2].blob = sc;
    e[nextra + 2].blob_bytes = sizeof sc;
    unsigned char pos[_VS_DATA_POS_BYTES]; // the attached loader's position (>>data)
    if (t->data) {
        _vs_data_pos(t->data, pos);
        e[nextra + 3].name = _VS_DATA_ENTRY;
        e[nextra + 3].kind = VS_CKPT_BLOB;
        e[nextra + 3].blob = pos;
        e[nextra + 3].blob_bytes = sizeof pos;
    }
    vs_ckpt_save_opts o;
    memset(&o, 0, sizeof o);
    o.async = async; // (text, skipped, the scale and the data position are copied by an async save)
    return vs_ckpt_save_ddp(t->ck, path, t->ddp, "", e, nextra + 3 + (t->data != NULL), &o);
}

VS_API vs_result vs_train_wait(vs_train* t)
{
    _VS_TRY(_VS_HL_GONE("vs_train_wait", t));
    if (!t) return vs_set_error(VS_ERR_NULL, "vs_train_wait: train is NULL");
    return t->ck ? vs_ckpt_wait(t->ck) : VS_OK;
}

/* VS_ERR_MISMATCH listing the checkpoint's tensors this model lacks (desc.load_partial
   0): an entry whose name, without an optimizer-state suffix, is none of the model's
   parameters and none of the caller's extra entries. Blobs and "__" names are the
   training state's own. */
_VS_HL_PRIVATE vs_result _vs_hl_unexpected(const vs_train* t, const char* path, const _vs_ckpt_index* ix,
                                           const vs_ckpt_entry* extra, int nextra)
{
    static const char* const sfx[] = {".master", ".exp_avg_sq", ".exp_avg", ".momentum"};
    const vs_model_desc* m = t->desc.model;
    char list[600];
    size_t len = 0;
    int n = 0;
    list[0] = 0;
    for (int i = 0; i < ix->ne; i++) {
        const char* name = ix->e[i].name;
        if (ix->e[i].kind == VS_CKPT_BLOB || !strncmp(name, "__", 2)) continue;
        int known = 0;
        for (int x = 0; x < nextra && !known; x++) known = extra[x].name && !strcmp(extra[x].name, name);
        size_t base = strlen(name);
        for (size_t k = 0; k < sizeof sfx / sizeof sfx[0]; k++) {
            size_t sl = strlen(sfx[k]);
            if (base > sl && !strcmp(name + base - sl, sfx[k])) {
                base -= sl;
                break;
            }
        }
        for (int l = 0; l < m->nlayers && !known; l++)
            for (int q = 0; q < m->layers[l].nparams && !known; q++) {
                const char* pn = m->layers[l].params[q].name;
                known = pn && strlen(pn) == base && !strncmp(pn, name, base);
            }
        if (known) continue;
        if (n < 8 && len < sizeof list - 1)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s\"%s\"", n ? ", " : "", name);
        if (len > sizeof list - 1) len = sizeof list - 1;
        n++;
    }
    if (!n) return VS_OK;
    return vs_set_error(VS_ERR_MISMATCH, "vs_train_load: %s holds %d tensor%s this model lacks: %s%s (another model's "
                        "checkpoint? vs_train_desc.load_partial = 1 loads what the model has and ignores them)", path, n,
                        n == 1 ? "" : "s", list, n > 8 ? ", ..." : "");
}

/* What vs_train_load needs of the index at path: which of the training state's
   blobs it holds (_VS_HL_HAS_*, into *has), and whether it holds tensors this
   model lacks. Collective. Rank 0 alone reads and checks the whole index (with
   its extra entries) and broadcasts a fixed-size answer, so a rank other than
   0 holds the same bytes whatever the world (before, every rank parsed the
   whole index); a bad index or a tensor the model lacks fails every rank with
   rank 0's message. */
enum { _VS_HL_HAS_SKIPPED = 1, _VS_HL_HAS_SCALE = 2, _VS_HL_HAS_DATA = 4 };
typedef struct _vs_hl_ixinfo {
    int32_t r, has;
    char why[_VS_ERR_MSG];
} _vs_hl_ixinfo;

_VS_HL_PRIVATE vs_result _vs_hl_index_info(vs_train* t, const char* path, const vs_ckpt_entry* extra, int nextra,
                                           int* has)
{
    vs_ckpt* ck = t->ck;
    _vs_hl_ixinfo in;
    memset(&in, 0, sizeof in);
    if (ck->rank == 0) {
        char file[4096];
        _vs_ckpt_fmt(file, sizeof file, "%s/" _VS_CKPT_INDEX, path);
        _vs_ckpt_index ix;
        memset(&ix, 0, sizeof ix);
        vs_result r = _vs_ckpt_index_read_one(ck, file, &ix);
        if (r) r = vs_set_error(r, "vs_train_load: %s", vs_last_error());
        if (!r && _vs_ckpt_find(&ix, _VS_HL_SKIPPED_ENTRY)) {
            in.has |= _VS_HL_HAS_SKIPPED;
            if (_vs_ckpt_find(&ix, _VS_HL_SCALE_ENTRY)) in.has |= _VS_HL_HAS_SCALE; // (older checkpoints lack it)
        }
        if (!r && _vs_ckpt_find(&ix, _VS_DATA_ENTRY)) in.has |= _VS_HL_HAS_DATA; // (a data loader's position: >>data)
        if (!r && !t->desc.load_partial) r = _vs_hl_unexpected(t, path, &ix, extra, nextra);
        _vs_ckpt_index_free(ck->w, &ix);
        in.r = (int32_t)r;
        if (r) _vs_save_error(in.why, sizeof in.why);
    }
    vs_result rb = _vs_ckpt_coll(ck, _VS_CKPT_BCAST, NULL, &in, sizeof in, VS_U8, 0);
    if (rb) return vs_set_error(rb, "vs_train_load: %s: rank 0's answer about its index: %s", path, vs_last_error());
    in.why[sizeof in.why - 1] = 0;
    if (in.r) return vs_set_error((vs_result)in.r, "%s", in.why);
    *has = in.has;
    return VS_OK;
}

VS_API vs_result vs_train_load(vs_train* t, const char* path, vs_ckpt_entry* extra, int nextra)
{
    _VS_TRY(_VS_HL_GONE("vs_train_load", t));
    if (!t || !path) return vs_set_error(VS_ERR_NULL, "vs_train_load: %s is NULL", t ? "path" : "train");
    if (nextra < 0 || nextra > 60 || (nextra && !extra))
        return vs_set_error(VS_ERR_INVALID, "vs_train_load: %d extra entries", nextra);
    t->acc_n = 0; // (a step's calls taken before: their gradients are dropped, the next call starts a step)
    _VS_TRY(_vs_hl_ck(t));
    // the skipped count, scale and data position, where the checkpoint has them (every rank asks for the same)
    int has = 0;
    _VS_TRY(_vs_hl_index_info(t, path, extra, nextra, &has));
    const int has_skipped = !!(has & _VS_HL_HAS_SKIPPED), has_scale = !!(has & _VS_HL_HAS_SCALE);
    const int has_data = !!(has & _VS_HL_HAS_DATA);
    vs_ckpt_entry e[63];
    memset(e, 0, sizeof e);
    for (int i = 0; i < nextra; i++) e[i] = extra[i];
    int64_t skipped = 0;
    e[nextra].name = _VS_HL_SKIPPED_ENTRY;
    e[nextra].kind = VS_CKPT_BLOB;
    e[nextra].blob = &skipped;
    e[nextra].blob_bytes = sizeof skipped;
    unsigned char sc[16];
    memset(sc, 0, sizeof sc);
    e[nextra + 1].name = _VS_HL_SCALE_ENTRY;
    e[nextra + 1].kind = VS_CKPT_BLOB;
    e[nextra + 1].blob = sc;
    e[nextra + 1].blob_bytes = sizeof sc;
    unsigned char pos[_VS_DATA_POS_BYTES];
    memset(pos, 0, sizeof pos);
    vs_ckpt_entry* de = &e[nextra + has_skipped + has_scale];
    if (has_data) de->name = _VS_DATA_ENTRY, de->kind = VS_CKPT_BLOB, de->blob = pos, de->blob_bytes = sizeof pos;
    // (ZeRO-3: vs_ckpt_load_ddp drops the gathers the last step prefetched from the old shards)
    vs_result r = vs_ckpt_load_ddp(t->ck, path, t->ddp, "", e, nextra + has_skipped + has_scale + has_data);
    if (r) {
        // a parameter the checkpoint lacks or holds with another shape: the model does not match
        return vs_set_error(r, "vs_train_load: %s (does the checkpoint hold this model?)", vs_last_error());
    }
    if (has_skipped && (e[nextra].blob_bytes != sizeof skipped || skipped < 0))
        return vs_set_error(VS_ERR_INVALID, "vs_train_load: %s: \"" _VS_HL_SKIPPED_ENTRY "\" holds %zu bytes, %lld",
                            path, e[nextra].blob_bytes, (long long)skipped);
    double scale = 0;
    int64_t good = 0;
    memcpy(&scale, sc, 8), memcpy(&good, sc + 8, 8);
    if (has_scale && (e[nextra + 1].blob_bytes != sizeof sc || !isfinite(scale) || scale <= 0 || good < 0))
        return vs_set_error(VS_ERR_INVALID, "vs_train_load: %s: \"" _VS_HL_SCALE_ENTRY "\" holds %zu bytes, scale %g, "
                            "%lld good steps", path, e[nextra + 1].blob_bytes, scale, (long long)good);
    for (int i = 0; i < nextra; i++) extra[i].blob_bytes = e[i].blob_bytes; // (the blobs' stored sizes)
    if (has_data && t->data) _VS_TRY(_vs_data_restore(t->data, pos, de->blob_bytes, "vs_train_load", path));
    if (has_data && !t->data) memcpy(t->data_pos, pos, sizeof pos), t->has_data_pos = 1; // (for the loader that opens)
    t->skipped = skipped;
    if (has_scale && t->ls.enable) t->scale = scale, t->good = good; // (a run without scaling keeps 1)
    t->grad_norm = NAN;
    return VS_OK;
}

VS_API vs_result vs_train_saved_plan(const char* path, vs_plan* out)
{
    const char* fn = "vs_train_saved_plan";
    if (!path || !out) return vs_set_error(VS_ERR_NULL, "%s: %s is NULL", fn, path ? "out" : "path");
    char file[4200];
    snprintf(file, sizeof file, "%s/" _VS_CKPT_INDEX, path);
    int fd;
    struct stat st; // (a FIFO or device in a file's place is refused, never opened blocking: the checkpoint loader's open)
    vs_result r = _vs_ckpt_open_file(file, &fd, &st);
    if (r) return vs_set_error(r, "%s: %s", fn, vs_last_error());
    long len = (long)st.st_size;
    char* text = len > 0 && len < (1L << 30) ? (char*)vs_alloc(NULL, (size_t)len + 1) : NULL;
    r = text ? _vs_ckpt_pread(fd, file, text, (size_t)len, 0) : VS_ERR_IO;
    close(fd);
    if (!text || r) {
        vs_free(NULL, text);
        return vs_set_error(VS_ERR_IO, "%s: cannot read %s", fn, file);
    }
    _vs_ckpt_index ix;
    r = _vs_ckpt_index_parse(NULL, file, text, (size_t)len, &ix);
    vs_free(NULL, text);
    if (r) return r;
    const _vs_ckpt_ientry* e = NULL;
    for (int i = 0; i < ix.ne; i++)
        if (!strcmp(ix.e[i].name, _VS_HL_PLAN_ENTRY)) e = &ix.e[i];
    char plan[4096];
    if (!e || e->npieces < 1 || e->blob_bytes >= sizeof plan)
        r = vs_set_error(VS_ERR_INVALID, "%s: %s holds no plan", fn, path);
    if (!r) {
        snprintf(file, sizeof file, "%s/%s", path, ix.files[e->pieces[0].file]);
        int g = -1;
        r = _vs_ckpt_open_file(file, &g, &st);
        if (!r) r = _vs_ckpt_pread(g, file, plan, (size_t)e->blob_bytes, e->pieces[0].data_begin);
        if (r) r = vs_set_error(VS_ERR_IO, "%s: cannot read the plan from %s: %s", fn, file, vs_last_error());
        if (g >= 0) close(g);
        if (!r && ix.block && e->pieces[0].ncrc && _vs_crc32c(0, plan, (size_t)e->blob_bytes) != e->pieces[0].crc[0])
            r = vs_set_error(VS_ERR_IO, "%s: the plan in %s fails its checksum", fn, file);
        plan[r ? 0 : e->blob_bytes] = 0;
    }
    _vs_ckpt_index_free(NULL, &ix);
    return r ? r : vs_plan_parse(plan, out);
}

/* One piece of state vs_train_reconfigure moves: a parameter's values (which
   NONE) or one of its optimizer states, old and new: where they lie and which
   flat range of the local shard each holds. */
typedef struct _vs_hl_move {
    const char* name;
    vs_ddp_state which;
    size_t esize;
    int64_t n;      // elements of the local shard
    char* oldp;     // element ob of the old state (NULL: none here)
    int64_t ob, oe; // [ob, oe): the old state's range here (empty: not a holder)
    char* newp;     // element nb of the new state
    int64_t nb, ne;
} _vs_hl_move;

static const char* const _vs_hl_state_names[] = {"value", "master", "exp_avg", "exp_avg_sq", "momentum", "custom0",
                                                 "custom1"};

/* The pieces of [0, n) the DP group's members hold, each taken once: member j
   gives [from[j], to[j]) (empty: none), the first holder of each element in
   order of their ranges; the elements nobody holds are lost (their count). */
_VS_HL_PRIVATE int64_t _vs_hl_pieces(const int64_t* rg, int dp, int64_t n, int64_t* from, int64_t* to)
{
    int64_t cov = 0;
    for (int j = 0; j < dp; j++) from[j] = to[j] = 0;
    int64_t lost = 0;
    for (;;) { // the member whose range starts first among those reaching past cov
        int best = -1;
        for (int j = 0; j < dp; j++)
            if (rg[4 * j + 1] > cov && rg[4 * j + 1] > rg[4 * j] && (best < 0 || rg[4 * j] < rg[4 * best])) best = j;
        if (best < 0) break;
        int64_t b = rg[4 * best] > cov ? rg[4 * best] : cov;
        lost += b - cov;
        from[best] = b, to[best] = rg[4 * best + 1];
        cov = to[best];
    }
    return lost + (n > cov ? n - cov : 0);
}

/* A copy of state bytes: host memory, or device memory on GPUs (after the
   collectives that wrote src: the caller synchronised their stream). */
_VS_HL_PRIVATE vs_result _vs_hl_copy(vs_train* t, void* dst, const void* src, size_t bytes)
{
    if (!bytes) return VS_OK;
    if (!t->dev) {
        memcpy(dst, src, bytes);
        return VS_OK;
    }
#ifdef VESCALE_NCCL
    cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice);
    return e == cudaSuccess ? VS_OK : vs_cuda_error((int)e, "vs_train_reconfigure", "copying state");
#else
    return VS_ERR_UNSUPPORTED;
#endif
}

/* vs_train_reconfigure's counters: the largest step count any rank of the new
   mesh holds (*top), whether this rank's old state is that current one
   (*holder), the holders' skipped count, loss scale and good steps (cnt), and
   the data position (an attached loader's, or one loaded for a loader not yet
   open) from the first holder that has one: a loader a rank opens on the new
   state starts there (vs_data_open), the moved ones seek to it. */
_VS_HL_PRIVATE vs_result _vs_hl_move_counters(vs_train* old, vs_train* nt, vs_reconfig_info* inf, int64_t* top,
                                              int* holder, double* cnt)
{
    const char* fn = "vs_train_reconfigure";
    vs_world* w = nt->w;
    vs_comm* mc = vs_mesh_comm(nt->mesh);
    int64_t steps = old ? vs_ddp_step_count(old->ddp) : -1;
    *top = -1;
    _VS_TRY(_vs_host_coll(mc, 0, &steps, top, 1, VS_I64, VS_OP_MAX, fn));
    if (*top < 0) return vs_set_error(VS_ERR_STATE, "%s: no rank of the mesh holds a training state", fn);
    *holder = old && steps == *top;
    double mine[4] = {-1, -1, -1, 0};
    if (*holder) mine[0] = (double)old->skipped, mine[1] = old->scale, mine[2] = (double)old->good;
    _VS_TRY(_vs_host_coll(mc, 0, mine, cnt, 3, VS_F64, VS_OP_MAX, fn));
    int32_t h = *holder, hs = 0;
    _VS_TRY(_vs_host_coll(mc, 0, &h, &hs, 1, VS_I32, VS_OP_SUM, fn));
    inf->steps = *top;
    inf->holders = hs;
    size_t pb = 8 + _VS_DATA_POS_BYTES;
    unsigned char* pos = (unsigned char*)vs_alloc(w, pb * (size_t)(vs_comm_size(mc) + 1));
    if (!pos) return vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
    memset(pos, 0, pb);
    if (*holder && ((old->data && old->has_step_pos) || old->has_data_pos)) {
        pos[0] = 1;
        memcpy(pos + 8, old->data ? old->step_pos : old->data_pos, _VS_DATA_POS_BYTES);
    }
    vs_result pr = _vs_host_coll(mc, 1, pos, pos + pb, pb, VS_U8, VS_OP_SUM, fn);
    for (int i = 0; !pr && i < vs_comm_size(mc); i++)
        if (pos[pb * (size_t)(i + 1)]) {
            memcpy(nt->data_pos, pos + pb * (size_t)(i + 1) + 8, _VS_DATA_POS_BYTES), nt->has_data_pos = 1;
            break;
        }
    vs_free(w, pos);
    return pr;
}

/* The moves, in the new DDP's order: each parameter's values, then its
   optimizer states (mv: room for 7 a parameter; *K: how many), where they lie
   in the new state and, on a holder, in the old one (ZeRO-3's values: the
   owned range, as the optimizer states). Through DDP's public calls:
   vs_ddp_query_param_info, vs_ddp_param(_owned), vs_ddp_optim_state. */
_VS_HL_PRIVATE vs_result _vs_hl_list_moves(vs_train* old, vs_train* nt, int holder, _vs_hl_move* mv, int* K)
{
    const char* fn = "vs_train_reconfigure";
    vs_ddp* nd = nt->ddp;
    vs_result r = VS_OK;
    *K = 0;
    for (int i = 0; i < vs_ddp_num_params(nd) && !r; i++) {
        vs_ddp_param_info q, oq;
        memset(&oq, 0, sizeof oq);
        r = vs_ddp_query_param_info(nd, i, &q);
        int oi = -1;
        if (!r && holder) {
            int ox = _vs_hl_find(old, q.name);
            oi = ox >= 0 ? old->prm[ox].ddp : -1;
            if (oi >= 0) r = vs_ddp_query_param_info(old->ddp, oi, &oq);
            if (!r && (oi < 0 || oq.local_numel != q.local_numel))
                r = vs_set_error(VS_ERR_MISMATCH, "%s: \"%s\": the old state holds %s here: PP and TP must stay as they "
                                 "were", fn, q.name, oi < 0 ? "no shard of it" : "a shard of another size");
        }
        for (int s = 0; s < 7 && !r; s++) {
            vs_ddp_state which = (vs_ddp_state)s;
            if (s && vs_ddp_has_optim_state(nd, i, which) != 1) continue;
            _vs_hl_move* m = &mv[(*K)++];
            memset(m, 0, sizeof *m);
            m->name = q.name;
            m->which = which;
            m->n = q.local_numel;
            /* The values. ZeRO-1..3 take them from their owners only (ZeRO-3 keeps nothing else; under ZeRO-1/2
               the rest of a rank's copy is written by the step's all-gather, which the failure may have cut
               short: its wait reports that once, and the stale values read as current after), ZeRO-0 from any
               holder's whole copy. */
            if (s == 0 && nt->zero != VS_ZERO_0) {
                vs_ddp_span sp;
                m->esize = vs_dtype_size(q.dtype);
                if (nt->zero == VS_ZERO_3) {
                    r = vs_ddp_param_owned(nd, i, &sp);
                    m->newp = (char*)sp.data, m->nb = sp.begin, m->ne = sp.end;
                } else { // (the new state: the whole local shard, gathered from the owners' pieces)
                    m->newp = (char*)vs_ddp_param(nd, i), m->ne = q.local_numel;
                    if (q.local_numel > 0 && !m->newp) r = VS_ERR_STATE;
                }
                if (!r && holder) {
                    r = vs_ddp_param_owned(old->ddp, oi, &sp);
                    m->oldp = (char*)sp.data, m->ob = sp.begin, m->oe = sp.end;
                }
                if (r) r = vs_set_error(r, "%s: the values of \"%s\": %s", fn, q.name, vs_last_error());
                continue;
            }
            if (s == 0) { // the values: the whole local shard
                m->esize = vs_dtype_size(q.dtype);
                m->newp = (char*)vs_ddp_param(nd, i);
                m->ne = q.local_numel;
                if (holder) m->oldp = (char*)vs_ddp_param(old->ddp, oi), m->oe = oq.local_numel;
                if (q.local_numel > 0 && (!m->newp || (holder && !m->oldp)))
                    r = vs_set_error(VS_ERR_STATE, "%s: the values of \"%s\": %s", fn, q.name, vs_last_error());
                continue;
            }
            vs_ddp_span sp;
            m->esize = sizeof(float);
            r = vs_ddp_optim_state(nd, i, which, &sp);
            m->newp = (char*)sp.data, m->nb = sp.begin, m->ne = sp.end;
            if (!r && holder) {
                r = vs_ddp_optim_state(old->ddp, oi, which, &sp);
                m->oldp = (char*)sp.data, m->ob = sp.begin, m->oe = sp.end;
            }
        }
    }
    return r;
}

/* Move k's data: a copy where every DP member's new range lies in its old
   one, else a gather over DP of the pieces (from, to: scratch of dp each; g:
   of 4 dp) and a copy of this rank's new range out of it. rg: every member's
   ranges of every move (K of them). */
_VS_HL_PRIVATE vs_result _vs_hl_move_one(vs_train* nt, const _vs_hl_move* m, const int64_t* rg, int K, int k,
                                         int64_t* g, int64_t* from, int64_t* to, size_t* counts, vs_reconfig_info* inf)
{
    const char* fn = "vs_train_reconfigure";
    vs_world* w = nt->w;
    vs_comm* dc = nt->dpm ? vs_mesh_comm(nt->dpm) : NULL;
    const int dp = nt->dp, me = nt->dp_rank;
    size_t* displs = counts + dp;
    int local = 1;
    for (int j = 0; j < dp; j++) {
        const int64_t* x = &rg[((size_t)j * (size_t)K + (size_t)k) * 4];
        memcpy(&g[4 * j], x, 4 * sizeof(int64_t));
        if (x[3] > x[2] && (x[2] < x[0] || x[3] > x[1])) local = 0;
    }
    vs_result r = VS_OK;
    if (local) {
        if (m->ne > m->nb)
            r = _vs_hl_copy(nt, m->newp, m->oldp + (size_t)(m->nb - m->ob) * m->esize, (size_t)(m->ne - m->nb) * m->esize);
        inf->bytes_local += (m->ne - m->nb) * (int64_t)m->esize;
        return r;
    }
    (void)_vs_hl_pieces(g, dp, m->n, from, to);
    if (!dc) { // (DP 1: the piece this rank holds, the rest from the checkpoint loaded before)
        int64_t b = from[0] > m->nb ? from[0] : m->nb, e = to[0] < m->ne ? to[0] : m->ne;
        if (e > b) r = _vs_hl_copy(nt, m->newp + (size_t)(b - m->nb) * m->esize, m->oldp + (size_t)(b - m->ob) * m->esize,
                                   (size_t)(e - b) * m->esize);
        inf->bytes_local += e > b ? (e - b) * (int64_t)m->esize : 0;
        return r;
    }
    size_t fb = (size_t)(m->n ? m->n : 1) * m->esize;
    char* full = (char*)(nt->dev ? vs_device_alloc(w, fb) : vs_alloc(w, fb));
    if (!full) return vs_set_error(VS_ERR_NOMEM, "%s: out of memory (%lld elements of \"%s\")", fn, (long long)m->n, m->name);
    for (int j = 0; j < dp; j++)
        counts[j] = (size_t)(to[j] - from[j]) * m->esize, displs[j] = (size_t)from[j] * m->esize;
    const char* send = counts[me] ? m->oldp + (size_t)(from[me] - m->ob) * m->esize : full;
    r = vs_all_gatherv(dc, send, full, counts, displs, VS_U8, NULL);
    if (!r && nt->dev) r = vs_sync_stream(dc, NULL); // (the copies below read what it wrote)
    for (int j = 0; !r && j < dp; j++) { // the covered parts of this rank's new range
        int64_t b = from[j] > m->nb ? from[j] : m->nb, e = to[j] < m->ne ? to[j] : m->ne;
        if (e <= b) continue;
        r = _vs_hl_copy(nt, m->newp + (size_t)(b - m->nb) * m->esize, full + (size_t)b * m->esize,
                        (size_t)(e - b) * m->esize);
        if (j == me) inf->bytes_local += (e - b) * (int64_t)m->esize;
        else inf->bytes_moved += (e - b) * (int64_t)m->esize;
    }
    if (nt->dev) vs_device_free(w, full);
    else vs_free(w, full);
    return r;
}

/* vs_train_reconfigure's move of the state from the old training state (NULL:
   none here) into nt, the new one on its mesh: the counters, the list of
   moves, every DP member's ranges and what nobody holds any more (from ckpt),
   then each move's data. */
_VS_HL_PRIVATE vs_result _vs_hl_move_state(vs_train* old, vs_train* nt, const char* ckpt, vs_reconfig_info* inf)
{
    const char* fn = "vs_train_reconfigure";
    vs_world* w = nt->w;
    vs_comm* mc = vs_mesh_comm(nt->mesh);
    vs_comm* dc = nt->dpm ? vs_mesh_comm(nt->dpm) : NULL;
    const int dp = nt->dp, me = nt->dp_rank;
#ifdef VESCALE_NCCL
    // (its state is read below; a collective of the old mesh's that waits for a lost peer may hold its stream:
    // waited for with the new mesh's deadline, never for good)
    if (old && old->dev && old->stream) _VS_TRY(vs_sync_stream(mc, old->stream));
    // (ZeRO-3's prefetched gathers run on the DP communicator's stream: done, or dropped with a failed mesh, before
    // the moves allocate beside them; what they say is the old state's, not ours)
    if (old && old->dev && old->ddp) (void)vs_ddp_synchronize(old->ddp);
#endif
    int64_t top = -1;
    int holder = 0, K = 0;
    double all[4];
    _VS_TRY(_vs_hl_move_counters(old, nt, inf, &top, &holder, all));
    int np = vs_ddp_num_params(nt->ddp);
    _vs_hl_move* mv = (_vs_hl_move*)vs_alloc(w, sizeof(_vs_hl_move) * (size_t)(np ? np : 1) * 7);
    if (!mv) return vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
    vs_result r = _vs_hl_list_moves(old, nt, holder, mv, &K);
    // every member's ranges (DP group), and what nobody holds any more
    int64_t* rg = r ? NULL : (int64_t*)vs_alloc(w, sizeof(int64_t) * 4 * (size_t)(K ? K : 1) * (size_t)dp);
    int64_t* mine = r ? NULL : (int64_t*)vs_alloc(w, sizeof(int64_t) * 4 * (size_t)(K ? K : 1));
    int64_t *from = r ? NULL : (int64_t*)vs_alloc(w, sizeof(int64_t) * (size_t)dp * 2), *to = from ? from + dp : NULL;
    if (!r && (!rg || !mine || !from)) r = vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
    for (int k = 0; !r && k < K; k++)
        mine[4 * k] = mv[k].ob, mine[4 * k + 1] = mv[k].oe, mine[4 * k + 2] = mv[k].nb, mine[4 * k + 3] = mv[k].ne;
    if (!r && dc) r = _vs_host_coll(dc, 1, mine, rg, (size_t)K * 4, VS_I64, VS_OP_SUM, fn);
    else if (!r) memcpy(rg, mine, sizeof(int64_t) * 4 * (size_t)K);
    int64_t lost = 0, lost_all = 0;
    char first[300] = "";
    int64_t* g = r ? NULL : (int64_t*)vs_alloc(w, sizeof(int64_t) * 4 * (size_t)dp); // one move's ranges, by member
    if (!r && !g) r = vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
    for (int k = 0; !r && k < K; k++) {
        for (int j = 0; j < dp; j++) memcpy(&g[4 * j], &rg[((size_t)j * (size_t)K + (size_t)k) * 4], 4 * sizeof(int64_t));
        int64_t l = _vs_hl_pieces(g, dp, mv[k].n, from, to);
        if (l && !first[0])
            snprintf(first, sizeof first, "the %s of \"%s\" (%lld of its %lld local elements, in the DP group at PP %d, "
                     "TP %d)", _vs_hl_state_names[mv[k].which], mv[k].name, (long long)l, (long long)mv[k].n,
                     nt->stage, nt->tpm ? vs_mesh_rank(nt->tpm) : 0); // (the group, as every member names it)
        lost += l;
    }
    int64_t lost_here = me == 0 ? lost : 0; // (each DP group counted once)
    if (!r) r = _vs_host_coll(mc, 0, &lost_here, &lost_all, 1, VS_I64, VS_OP_SUM, fn);
    inf->lost = lost_all;
    if (!r && lost_all && !ckpt)
        r = vs_set_error(VS_ERR_STATE, "%s: %lld elements of the state lived only on failed ranks (%s; %s): pass the "
                         "last checkpoint to take those ranges from", fn, (long long)lost_all, nt->zero == VS_ZERO_3 ?
                         "ZeRO-3 shards the parameters and their optimizer state over DP, and no live replica held "
                         "these shards: they exist nowhere else" : "ZeRO shards the optimizer state over DP, and "
                         "the parameters' current values live with their owners",
                         first[0] ? first : "on another PP or TP coordinate");
    if (!r && lost_all) { // the whole checkpoint, then memory over it: only the lost ranges keep its values
        r = vs_train_load(nt, ckpt, NULL, 0);
        if (!r && vs_world_rank(w) == vs_mesh_global_rank(nt->mesh, 0))
            vs_log(w, VS_LOG_WARN, "%s: %lld state elements no live rank held come from %s (%s...), older than step "
                   "%lld", fn, (long long)lost_all, ckpt, first[0] ? first : "", (long long)top);
    }
    // the data
    size_t* counts = r ? NULL : (size_t*)vs_alloc(w, sizeof(size_t) * 2 * (size_t)dp);
    if (!r && !counts) r = vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
    if (!r) r = vs_ddp_owned_rewrite(nt->ddp, 1); // (ZeRO-3: no gather holds the old values; else nothing)
    for (int k = 0; !r && k < K; k++) r = _vs_hl_move_one(nt, &mv[k], rg, K, k, g, from, to, counts, inf);
    if (!r) r = vs_ddp_owned_rewrite(nt->ddp, 0);
    if (!r) { // the counters continue
        r = vs_ddp_set_step_count(nt->ddp, top);
        nt->skipped = (int64_t)all[0];
        if (nt->ls.enable) nt->scale = all[1], nt->good = (int64_t)all[2];
    }
    vs_free(w, counts);
    vs_free(w, g);
    vs_free(w, from);
    vs_free(w, mine);
    vs_free(w, rg);
    vs_free(w, mv);
    return r;
}

VS_API vs_result vs_train_reconfigure(vs_train** tp, const vs_train_desc* d, vs_mesh* mesh, const char* ckpt,
                                      vs_reconfig_info* info)
{
    const char* fn = "vs_train_reconfigure";
    double t0 = _vs_now();
    if (!tp || !d || !mesh || !d->plan)
        return vs_set_error(VS_ERR_NULL, "%s: %s is NULL", fn, !tp ? "t" : !d ? "desc" : !mesh ? "mesh" : "desc.plan");
    vs_train* old = *tp;
    _VS_TRY(_VS_HL_GONE(fn, old));
    /* The mesh's dims give the new form: (PP, DP, TP) plain DP; (PP, DPR, DPS, TP) HSDP over DPR x DPS, or,
       with one replica left (DPR 1), plain DP over DPS on a (PP, DP, TP) mesh of the same ranks (what
       vs_parallelize makes for that plan: the same state as a job started there). */
    static const char* const d3[3] = {"PP", "DP", "TP"}, *const d4[4] = {"PP", "DPR", "DPS", "TP"};
    const int nd = vs_mesh_ndims(mesh);
    int dimsok = nd == 3 || nd == 4;
    for (int i = 0; dimsok && i < nd; i++) dimsok = !strcmp(vs_mesh_dim_name(mesh, i), nd == 3 ? d3[i] : d4[i]);
    if (!dimsok) {
        char desc[128];
        vs_mesh_describe(mesh, desc, sizeof desc);
        return vs_set_error(VS_ERR_INVALID, "%s: the mesh %s must have the dims (PP, DP, TP), or (PP, DPR, DPS, TP) "
                            "for HSDP", fn, desc);
    }
    int pp = _vs_hl_sz(d->plan->pp), tps = _vs_hl_sz(d->plan->tp);
    if (vs_mesh_size(mesh, "PP") != pp || vs_mesh_size(mesh, "TP") != tps)
        return vs_set_error(VS_ERR_MISMATCH, "%s: the mesh has PP=%d, TP=%d, the plan PP=%d, TP=%d: only DP changes",
                            fn, vs_mesh_size(mesh, "PP"), vs_mesh_size(mesh, "TP"), pp, tps);
    const int dpr = nd == 4 ? vs_mesh_size(mesh, "DPR") : 1, dps = nd == 4 ? vs_mesh_size(mesh, "DPS") : 0;
    const int ndp = nd == 4 ? dpr * dps : vs_mesh_size(mesh, "DP");
    if (old && old->data && _vs_data_batch(old->data) % ndp)
        return vs_set_error(VS_ERR_INVALID, "%s: the attached data loader's batch of %lld rows does not split over DP "
                            "%d", fn, (long long)_vs_data_batch(old->data), ndp);
    vs_plan plan = *d->plan;
    plan.dp = ndp;
    plan.dp_shard = dpr > 1 ? dps : 0;
    vs_mesh* given = NULL; // (DPR 1: the caller's mesh, kept beside the (PP, DP, TP) one made over its ranks)
    if (nd == 4 && dpr == 1) {
        if (vs_mesh_comm(mesh) != vs_world_comm(vs_mesh_world(mesh)))
            return vs_set_error(VS_ERR_INVALID, "%s: a (PP, DPR 1, DPS, TP) mesh must be over the world's "
                                "communicator (as vs_mesh_shrink's and vs_mesh_init's are)", fn);
        vs_mesh_desc md;
        memset(&md, 0, sizeof md);
        md.shape[0] = pp, md.shape[1] = dps, md.shape[2] = tps;
        md.dim_names[0] = "PP", md.dim_names[1] = "DP", md.dim_names[2] = "TP";
        given = mesh;
        _VS_TRY(vs_mesh_init(vs_mesh_world(mesh), &md, &mesh));
    }
    vs_train_desc ndesc = *d;
    ndesc.plan = &plan;
    vs_train* nt = NULL;
    vs_result mr = _vs_hl_make(vs_mesh_world(mesh), &ndesc, mesh, 1, fn, &nt);
    if (mr) {
        if (given) vs_mesh_free(mesh);
        return mr;
    }
    nt->given = given;
    nt->desc.plan = d->plan; // (as vs_parallelize keeps it: the caller's)
    vs_reconfig_info inf;
    memset(&inf, 0, sizeof inf);
    vs_result r = _vs_hl_move_state(old, nt, ckpt, &inf);
    if (r) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s", vs_last_error());
        if (!given) nt->mesh = NULL; // (the caller's again; a mesh made here goes with nt)
        nt->given = NULL;
        vs_train_free(nt);
        return vs_set_error(r, "%s", msg);
    }
    vs_data* data = old ? old->data : NULL;
    if (data) old->data = NULL; // (it goes on with the new state)
    if (old) (void)vs_train_free(old); // (its communicators were aborted: what their release says is known)
    *tp = nt;
    if (data && (r = _vs_data_rebind(data, nt))) return r; // (the state moved: *t is the new one either way)
    inf.seconds = _vs_now() - t0;
    if (info) *info = inf;
    return VS_OK;
}

// >>data -----------------------------------------------------------------------

/* A batch in the ring: slot s % nslots holds batch s (since the last seek). */
typedef struct _vs_data_slot {
    int32_t* tok;                     // rows x T inputs
    int32_t* tgt;                     // rows x T targets
    int64_t epoch, window;            // where it was read from
    int64_t next_epoch, next_window;  // the position after it
    vs_result err;                    // a read error: this batch's, returned by the vs_data_next that takes it
    char msg[512];
} _vs_data_slot;

#define _VS_DATA_LIVE 0x76734441u /* "vsDA" */
#define _VS_DATA_DEAD 0x76734464u /* "vsDd": freed */
#define _VS_DATA_HEADER_BYTES (VS_DATA_HEADER_INTS * 4)

struct vs_data {
    uint32_t magic;
    vs_allocator al; // allocations: the training state's world's allocator (copied: the loader may outlive
                     // the world), or malloc
    vs_train* train; // attached (NULL: none, or detached by vs_train_free)
    char* names[2];  // the batch's input and target names (copies)
    int nshards;
    char** path;     // sorted
    int64_t* win0;   // [nshards + 1]: the first window of each file, then N
    int64_t N, T, B, rows, tokens;
    int dp, dprank, shuffle, nslots, has_thread;
    uint64_t seed;
    int64_t vocab;
    double timeout;
    /* The reader's (the thread's, or vs_data_next's without one): one file kept open. */
    int fd, fd_file;
    unsigned char* raw; // (T + 1) x 2 bytes
    _vs_data_slot* slot;
    /* Shared with the thread, under mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t th;
    int stop, failed;            // failed: the reader stopped at an error (the slot holds it) until a seek
    uint64_t gen;                // bumped by a seek: a batch read before it is dropped
    int64_t produced, consumed;  // batches read and taken since the last seek
    int64_t pe, pw;              // the reader's cursor: the next batch to read
    double read_s;
    /* The caller's. */
    int64_t ce, cw;              // the position: after the last batch taken
    int64_t batches;
    double wait_s, last_wait_s;
};

/* The loader's memory, through its own copy of the world's allocator. */
_VS_HL_PRIVATE void* _vs_data_mem(const vs_data* d, size_t n)
{
    return d->al.alloc ? d->al.alloc(n ? n : 1, d->al.user) : malloc(n ? n : 1);
}
_VS_HL_PRIVATE void _vs_data_unmem(const vs_data* d, void* p)
{
    if (p && d->al.free) d->al.free(p, d->al.user);
    else free(p);
}

_VS_HL_PRIVATE vs_result _vs_data_gone(const char* fn, const vs_data* d)
{
    if (!d) return vs_set_error(VS_ERR_NULL, "%s: data is NULL", fn);
    if (d->magic == _VS_DATA_DEAD) return vs_set_error(VS_ERR_STATE, "%s: this data loader was already freed", fn);
    if (d->magic != _VS_DATA_LIVE) return vs_set_error(VS_ERR_INVALID, "%s: %p is not a live data loader", fn, (const void*)d);
    return VS_OK;
}

/* splitmix64's finalizer: the keyed permutation's round function and its keys. */
_VS_HL_PRIVATE uint64_t _vs_data_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Entry k of epoch's order over 0 .. n-1: a 6-round Feistel network keyed by
   (seed, epoch) on the smallest even number of bits that holds n, walked
   until it lands below n (a bijection there: every walk ends, in under 4
   rounds on average). No table: any rank computes any entry. */
_VS_HL_PRIVATE int64_t _vs_data_perm(uint64_t seed, int64_t epoch, int64_t n, int64_t k)
{
    int bits = 2;
    while (bits < 63 && ((uint64_t)1 << bits) < (uint64_t)n) bits++;
    bits += bits & 1;
    int half = bits / 2;
    uint64_t mask = ((uint64_t)1 << half) - 1, key[6];
    uint64_t z = seed ^ _vs_data_mix((uint64_t)epoch + 0x632be59bd9b4e019ull);
    for (int i = 0; i < 6; i++) key[i] = _vs_data_mix(z += 0x9e3779b97f4a7c15ull);
    uint64_t x = (uint64_t)k;
    do {
        uint64_t L = x >> half, R = x & mask;
        for (int i = 0; i < 6; i++) {
            uint64_t f = L ^ (_vs_data_mix(R ^ key[i]) & mask);
            L = R, R = f;
        }
        x = L << half | R;
    } while (x >= (uint64_t)n);
    return (int64_t)x;
}

/* The file and first token of entry k of epoch's order. */
_VS_HL_PRIVATE void _vs_data_locate(const vs_data* d, int64_t epoch, int64_t k, int* file, int64_t* first)
{
    int64_t x = d->shuffle ? _vs_data_perm(d->seed, epoch, d->N, k) : k;
    int lo = 0, hi = d->nshards - 1;
    while (lo < hi) { // the last file whose first window is <= x
        int mid = lo + (hi - lo + 1) / 2;
        if (d->win0[mid] <= x) lo = mid;
        else hi = mid - 1;
    }
    *file = lo, *first = (x - d->win0[lo]) * d->T;
}

/* A cursor where a batch starts: an epoch with fewer than B entries left ends. */
_VS_HL_PRIVATE void _vs_data_norm(const vs_data* d, int64_t* epoch, int64_t* window)
{
    if (*window + d->B > d->N) ++*epoch, *window = 0;
}

_VS_HL_PRIVATE size_t _vs_data_pread(int fd, void* buf, size_t n, int64_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, (char*)buf + got, n - got, (off_t)(off + (int64_t)got));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    return got;
}

_VS_HL_PRIVATE uint32_t _vs_data_le32(const unsigned char* p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A read error into the slot (the reader may be the loader's thread: the
   message travels in the slot to the vs_data_next that takes the batch). */
_VS_HL_PRIVATE vs_result _vs_data_fail(_vs_data_slot* s, vs_result code, const char* fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->msg, sizeof s->msg, fmt, ap);
    va_end(ap);
    return s->err = code;
}

/* Reads this rank's rows of the batch at (epoch, window) into s. */
_VS_HL_PRIVATE vs_result _vs_data_read(vs_data* d, int64_t epoch, int64_t window, _vs_data_slot* s)
{
    const char* fn = "vs_data_next";
    int64_t T = d->T;
    s->err = VS_OK, s->msg[0] = 0;
    _vs_data_norm(d, &epoch, &window);
    s->epoch = epoch, s->window = window;
    s->next_epoch = epoch, s->next_window = window + d->B;
    _vs_data_norm(d, &s->next_epoch, &s->next_window);
    for (int64_t r = 0; r < d->rows; r++) {
        int f;
        int64_t first;
        _vs_data_locate(d, epoch, window + (int64_t)d->dprank * d->rows + r, &f, &first);
        if (d->fd_file != f) {
            if (d->fd >= 0) close(d->fd);
            d->fd_file = -1;
            d->fd = open(d->path[f], O_RDONLY | O_NONBLOCK); // (checked regular at open; replaced since: no wait)
            if (d->fd < 0) return _vs_data_fail(s, VS_ERR_IO, "%s: cannot open %s: %s", fn, d->path[f], strerror(errno));
            d->fd_file = f;
        }
        size_t want = (size_t)(T + 1) * 2;
        int64_t off = _VS_DATA_HEADER_BYTES + 2 * first;
        size_t got = _vs_data_pread(d->fd, d->raw, want, off);
        if (got != want)
            return _vs_data_fail(s, VS_ERR_IO, "%s: %s: read %zu of %zu bytes at byte %lld (did the file change since "
                                 "vs_data_open?)", fn, d->path[f], got, want, (long long)off);
        int32_t* tok = s->tok + r * T;
        int32_t* tgt = s->tgt + r * T;
        for (int64_t i = 0; i <= T; i++) {
            int32_t v = (int32_t)((uint32_t)d->raw[2 * i] | (uint32_t)d->raw[2 * i + 1] << 8);
            if (d->vocab > 0 && v >= d->vocab)
                return _vs_data_fail(s, VS_ERR_INVALID, "%s: %s: token %d at token %lld of the file is not below the "
                                     "vocabulary's %lld (vs_data_desc.vocab)", fn, d->path[f], (int)v,
                                     (long long)(first + i), (long long)d->vocab);
            if (i < T) tok[i] = v;
            if (i > 0) tgt[i - 1] = v;
        }
    }
    return VS_OK;
}

/* The read-ahead thread: reads batch `produced` while fewer than nslots - 1
   are waiting (the caller holds the one it took last). */
_VS_HL_PRIVATE void* _vs_data_thread(void* arg)
{
    vs_data* d = (vs_data*)arg;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (!d->stop && (d->failed || d->produced - d->consumed >= d->nslots - 1)) {
            struct timespec dl = _vs_abs_deadline(1.0); // (a slice: it also wakes on stop and seek)
            pthread_cond_timedwait(&d->cv, &d->mu, &dl);
        }
        if (d->stop) break;
        uint64_t gen = d->gen;
        int64_t e = d->pe, w = d->pw;
        _vs_data_slot* s = &d->slot[d->produced % d->nslots];
        pthread_mutex_unlock(&d->mu);
        double t0 = _vs_now();
        vs_result r = _vs_data_read(d, e, w, s);
        double dt = _vs_now() - t0;
        pthread_mutex_lock(&d->mu);
        d->read_s += dt;
        if (gen != d->gen) continue; // a seek came: dropped
        d->produced++;
        if (r) d->failed = 1;
        else d->pe = s->next_epoch, d->pw = s->next_window;
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

_VS_HL_PRIVATE int _vs_data_cmp(const void* a, const void* b)
{
    return strcmp(*(char* const*)a, *(char* const*)b);
}

/* Checks file i's header against its size; its token count into *ntok. */
_VS_HL_PRIVATE vs_result _vs_data_check_file(const vs_data* d, int i, int64_t* ntok)
{
    const char* fn = "vs_data_open";
    const char* p = d->path[i];
    int fd = open(p, O_RDONLY | O_NONBLOCK); // (a FIFO the glob matched: no open that waits for a writer)
    if (fd < 0) return vs_set_error(VS_ERR_IO, "%s: cannot open %s: %s", fn, p, strerror(errno));
    struct stat st;
    unsigned char h[_VS_DATA_HEADER_BYTES];
    int ok = fstat(fd, &st) == 0, reg = ok && S_ISREG(st.st_mode);
    size_t got = reg ? _vs_data_pread(fd, h, sizeof h, 0) : 0;
    close(fd);
    if (!ok) return vs_set_error(VS_ERR_IO, "%s: cannot stat %s: %s", fn, p, strerror(errno));
    if (!reg)
        return vs_set_error(VS_ERR_INVALID, "%s: %s is not a regular file (a %s): not a token shard", fn, p,
                            S_ISDIR(st.st_mode) ? "folder" : S_ISFIFO(st.st_mode) ? "FIFO" : "device or socket");
    int64_t size = (int64_t)st.st_size;
    if (got < sizeof h)
        return vs_set_error(VS_ERR_INVALID, "%s: %s holds %lld bytes, less than a token shard's %d-byte header "
                            "(%d x int32)", fn, p, (long long)size, _VS_DATA_HEADER_BYTES, VS_DATA_HEADER_INTS);
    int32_t magic = (int32_t)_vs_data_le32(h), version = (int32_t)_vs_data_le32(h + 4), n = (int32_t)_vs_data_le32(h + 8);
    if (magic != VS_DATA_MAGIC)
        return vs_set_error(VS_ERR_INVALID, "%s: %s: magic number %ld, not %d: not a token shard (a header of %d x "
                            "int32: magic, version, token count; then the tokens as uint16)", fn, p, (long)magic,
                            VS_DATA_MAGIC, VS_DATA_HEADER_INTS);
    if (version != VS_DATA_VERSION)
        return vs_set_error(VS_ERR_UNSUPPORTED, "%s: %s: version %ld; this reader knows version %d (uint16 tokens)", fn,
                            p, (long)version, VS_DATA_VERSION);
    int64_t want = _VS_DATA_HEADER_BYTES + 2 * (int64_t)n;
    if (n < 0 || size < want)
        return vs_set_error(VS_ERR_INVALID, "%s: %s is truncated: its header says %ld tokens (%lld bytes with the "
                            "header), the file holds %lld bytes", fn, p, (long)n, (long long)want, (long long)size);
    if (size > want)
        return vs_set_error(VS_ERR_INVALID, "%s: %s holds %lld bytes, more than the %lld its header's %ld tokens take",
                            fn, p, (long long)size, (long long)want, (long)n);
    if (n < d->T + 1)
        return vs_set_error(VS_ERR_INVALID, "%s: %s holds %ld tokens, fewer than a row's seq_len + 1 = %lld: the "
                            "sequence length is longer than this shard", fn, p, (long)n, (long long)(d->T + 1));
    *ntok = n;
    return VS_OK;
}

/* The position as a checkpoint blob (the same on every rank), and back. */
#define _VS_DATA_POS_VERSION 1
_VS_HL_PRIVATE void _vs_data_pos(const vs_data* d, unsigned char* blob)
{
    int64_t v[_VS_DATA_POS_BYTES / 8] = {_VS_DATA_POS_VERSION, d->ce, d->cw, d->T, d->B, d->shuffle,
                                         (int64_t)d->seed, d->N, d->tokens, d->nshards};
    memcpy(blob, v, sizeof v);
}

_VS_HL_PRIVATE vs_result _vs_data_restore(vs_data* d, const unsigned char* blob, size_t bytes, const char* fn,
                                          const char* path)
{
    int64_t v[_VS_DATA_POS_BYTES / 8];
    memset(v, 0, sizeof v);
    memcpy(v, blob, bytes < sizeof v ? bytes : sizeof v);
    if (bytes != sizeof v || v[0] != _VS_DATA_POS_VERSION)
        return vs_set_error(VS_ERR_INVALID, "%s: %s: \"" _VS_DATA_ENTRY "\" holds %zu bytes, version %lld (%zu, %d)",
                            fn, path, bytes, (long long)v[0], sizeof v, _VS_DATA_POS_VERSION);
    if (v[3] != d->T || v[5] != d->shuffle || (uint64_t)v[6] != d->seed || v[7] != d->N || v[8] != d->tokens ||
        v[9] != d->nshards)
        return vs_set_error(VS_ERR_MISMATCH, "%s: %s: its data position is for seq_len %lld, shuffle %lld seed %llu, "
                            "%lld windows of %lld tokens in %lld files; this loader has seq_len %lld, shuffle %d seed "
                            "%llu, %lld windows of %lld tokens in %d files (the token stream would not continue)",
                            fn, path, (long long)v[3], (long long)v[5], (unsigned long long)v[6], (long long)v[7],
                            (long long)v[8], (long long)v[9], (long long)d->T, d->shuffle,
                            (unsigned long long)d->seed, (long long)d->N, (long long)d->tokens, d->nshards);
    if (v[1] < 0 || v[2] < 0 || v[2] >= d->N)
        return vs_set_error(VS_ERR_INVALID, "%s: %s: data position epoch %lld, window %lld (0..%lld)", fn, path,
                            (long long)v[1], (long long)v[2], (long long)d->N - 1);
    vs_result r = vs_data_seek(d, v[1], v[2]);
    return r ? vs_set_error(r, "%s: %s: %s", fn, path, vs_last_error()) : VS_OK;
}

_VS_HL_PRIVATE void _vs_data_detach(vs_data* d) { d->train = NULL; }

/* Frees what open made (the thread stopped first). */
_VS_HL_PRIVATE void _vs_data_release(vs_data* d)
{
    if (d->has_thread) {
        pthread_mutex_lock(&d->mu);
        d->stop = 1;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->th, NULL);
        d->has_thread = 0;
    }
    if (d->train) d->train->data = NULL;
    if (d->fd >= 0) close(d->fd);
    for (int i = 0; d->slot && i < d->nslots; i++) _vs_data_unmem(d, d->slot[i].tok), _vs_data_unmem(d, d->slot[i].tgt);
    for (int i = 0; d->path && i < d->nshards; i++) _vs_data_unmem(d, d->path[i]);
    _vs_data_unmem(d, d->slot), _vs_data_unmem(d, d->path), _vs_data_unmem(d, d->win0), _vs_data_unmem(d, d->raw);
    _vs_data_unmem(d, d->names[0]), _vs_data_unmem(d, d->names[1]);
    pthread_cond_destroy(&d->cv);
    pthread_mutex_destroy(&d->mu);
}

_VS_HL_PRIVATE char* _vs_data_strdup(const vs_data* d, const char* s)
{
    size_t n = strlen(s) + 1;
    char* c = (char*)_vs_data_mem(d, n);
    if (c) memcpy(c, s, n);
    return c;
}

/* The ring's batches and the reader's row buffer. */
_VS_HL_PRIVATE vs_result _vs_data_buffers(vs_data* d, size_t bytes)
{
    d->slot = (_vs_data_slot*)_vs_data_mem(d, (size_t)d->nslots * sizeof(_vs_data_slot));
    if (d->slot) memset(d->slot, 0, (size_t)d->nslots * sizeof(_vs_data_slot));
    int ok = d->slot != NULL;
    for (int i = 0; ok && i < d->nslots; i++) {
        d->slot[i].tok = (int32_t*)_vs_data_mem(d, bytes), d->slot[i].tgt = (int32_t*)_vs_data_mem(d, bytes);
        ok = d->slot[i].tok && d->slot[i].tgt;
    }
    d->raw = ok ? (unsigned char*)_vs_data_mem(d, (size_t)(d->T + 1) * 2) : NULL;
    if (!d->raw) return vs_set_error(VS_ERR_NOMEM, "vs_data_open: %d batches of %zu bytes", d->nslots, 2 * bytes);
    return VS_OK;
}

/* Every zero-is-default value of a vs_data_desc, resolved and checked in this
   one place: vs_data_query_desc returns the result, vs_data_open opens it. fn
   names the caller in messages. */
_VS_HL_PRIVATE vs_result _vs_data_resolve(const vs_data_desc* desc, vs_data_desc* out, const char* fn)
{
    if (!desc->files || !*desc->files)
        return vs_set_error(VS_ERR_INVALID, "%s: desc.files (a glob pattern of token shard files) is required", fn);
    if (desc->batch < 1) return vs_set_error(VS_ERR_INVALID, "%s: desc.batch = %lld rows (>= 1)", fn, (long long)desc->batch);
    if (desc->seq_len < 1 || desc->seq_len > ((int64_t)1 << 30))
        return vs_set_error(VS_ERR_INVALID, "%s: desc.seq_len = %lld (1 .. 2^30)", fn, (long long)desc->seq_len);
    if (desc->batch > ((int64_t)1 << 40) / desc->seq_len)
        return vs_set_error(VS_ERR_INVALID, "%s: desc.batch %lld x seq_len %lld tokens is too large", fn,
                            (long long)desc->batch, (long long)desc->seq_len);
    if (desc->prefetch < -1 || desc->prefetch > 64)
        return vs_set_error(VS_ERR_INVALID, "%s: desc.prefetch = %d (-1: no thread, 0: 2, up to 64)", fn, desc->prefetch);
    if (!(desc->timeout >= 0)) return vs_set_error(VS_ERR_INVALID, "%s: desc.timeout = %g s (>= 0; 0: 60)", fn, desc->timeout);
    if (desc->vocab < 0) return vs_set_error(VS_ERR_INVALID, "%s: desc.vocab = %lld (0: any)", fn, (long long)desc->vocab);
    if (desc->shuffle != 0 && desc->shuffle != 1)
        return vs_set_error(VS_ERR_INVALID, "%s: desc.shuffle = %d (0 or 1)", fn, desc->shuffle);
    *out = *desc;
    if (desc->train) {
        _VS_TRY(_VS_HL_GONE(fn, desc->train));
        if (!desc->not_saved && desc->train->data)
            return vs_set_error(VS_ERR_STATE, "%s: this training state has a data loader attached already (free it "
                                "first, or open this one with desc.not_saved)", fn);
        out->dp_size = desc->train->dp, out->dp_rank = desc->train->dp_rank;
    } else {
        out->dp_size = desc->dp_size ? desc->dp_size : 1;
        if (desc->dp_size < 0)
            return vs_set_error(VS_ERR_INVALID, "%s: desc.dp_size = %d (>= 0; 0: 1)", fn, desc->dp_size);
        if (desc->dp_rank < 0 || desc->dp_rank >= out->dp_size)
            return vs_set_error(VS_ERR_INVALID, "%s: desc.dp_rank %d of dp_size %d", fn, desc->dp_rank, desc->dp_size);
    }
    if (desc->batch % out->dp_size)
        return vs_set_error(VS_ERR_INVALID, "%s: DP=%d does not divide the batch of %lld rows", fn, out->dp_size,
                            (long long)desc->batch);
    if (!out->prefetch) out->prefetch = 2;
    if (!out->timeout) out->timeout = 60;
    if (!out->input_name) out->input_name = "tokens";
    if (!out->target_name) out->target_name = "targets";
    if (!*out->input_name || !*out->target_name)
        return vs_set_error(VS_ERR_INVALID, "%s: desc.%s is empty (NULL: the default)", fn,
                            *out->input_name ? "target_name" : "input_name");
    if (!strcmp(out->input_name, out->target_name)) // (vs_train_step refuses a batch naming one input twice)
        return vs_set_error(VS_ERR_INVALID, "%s: desc.input_name and target_name are both \"%s\"", fn,
                            out->input_name);
    return VS_OK;
}

VS_API vs_result vs_data_query_desc(const vs_data_desc* desc, vs_data_desc* out)
{
    const char* fn = "vs_data_query_desc";
    if (!desc || !out) return vs_set_error(VS_ERR_NULL, "%s: %s is NULL", fn, desc ? "out" : "desc");
    return _vs_data_resolve(desc, out, fn);
}

/* The files the pattern names, sorted by strcmp (glob's own order follows the locale). */
_VS_HL_PRIVATE vs_result _vs_data_glob(vs_data* d, const char* pattern)
{
    const char* fn = "vs_data_open";
    glob_t g;
    memset(&g, 0, sizeof g);
    int gr = glob(pattern, 0, NULL, &g);
    if (gr == GLOB_NOMATCH || (gr == 0 && g.gl_pathc == 0)) {
        globfree(&g);
        return vs_set_error(VS_ERR_IO, "%s: no file matches \"%s\" (desc.files)", fn, pattern);
    }
    if (gr) {
        globfree(&g);
        return vs_set_error(VS_ERR_IO, "%s: glob(\"%s\") failed (%s)", fn, pattern,
                            gr == GLOB_NOSPACE ? "out of memory" : "a folder could not be read");
    }
    vs_result r = g.gl_pathc > (size_t)INT32_MAX / 2 ? vs_set_error(VS_ERR_INVALID, "%s: %zu files", fn, (size_t)g.gl_pathc) : VS_OK;
    if (!r) d->path = (char**)_vs_data_mem(d, g.gl_pathc * sizeof(char*));
    if (!r && !d->path) r = vs_set_error(VS_ERR_NOMEM, "%s: %zu file names", fn, (size_t)g.gl_pathc);
    for (size_t i = 0; !r && i < g.gl_pathc; i++) {
        d->path[i] = _vs_data_strdup(d, g.gl_pathv[i]);
        if (!d->path[i]) r = vs_set_error(VS_ERR_NOMEM, "%s: a file name", fn);
        else d->nshards = (int)i + 1;
    }
    if (!r) qsort(d->path, (size_t)d->nshards, sizeof(char*), _vs_data_cmp);
    globfree(&g);
    return r;
}

VS_API vs_result vs_data_open(const vs_data_desc* desc, vs_data** out)
{
    const char* fn = "vs_data_open";
    if (!desc || !out) return vs_set_error(VS_ERR_NULL, "%s: %s is NULL", fn, desc ? "out" : "desc");
    *out = NULL;
    vs_data_desc rd; // resolved
    memset(&rd, 0, sizeof rd);
    _VS_TRY(_vs_data_resolve(desc, &rd, fn));
    desc = &rd;
    vs_world_desc wd; // (the allocator: the loader keeps its own copy)
    memset(&wd, 0, sizeof wd);
    if (desc->train) _VS_TRY(vs_world_query_desc(desc->train->w, &wd));
    vs_data tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.al = wd.allocator;
    vs_data* d = (vs_data*)_vs_data_mem(&tmp, sizeof *d);
    if (!d) return vs_set_error(VS_ERR_NOMEM, "%s: the loader", fn);
    memset(d, 0, sizeof *d);
    d->al = wd.allocator, d->fd = d->fd_file = -1;
    pthread_mutex_init(&d->mu, NULL);
    _vs_cond_init(&d->cv);
    d->T = desc->seq_len, d->B = desc->batch, d->dp = desc->dp_size, d->dprank = desc->dp_rank;
    d->rows = desc->batch / desc->dp_size;
    d->shuffle = desc->shuffle, d->seed = desc->seed, d->vocab = desc->vocab;
    d->timeout = desc->timeout;
    d->nslots = desc->prefetch < 0 ? 1 : desc->prefetch + 1;
    d->names[0] = _vs_data_strdup(d, desc->input_name);
    d->names[1] = _vs_data_strdup(d, desc->target_name);
    vs_result r = d->names[0] && d->names[1] ? VS_OK : vs_set_error(VS_ERR_NOMEM, "%s: names", fn);
    if (!r) r = _vs_data_glob(d, desc->files);
    if (!r) d->win0 = (int64_t*)_vs_data_mem(d, (size_t)(d->nshards + 1) * sizeof(int64_t));
    if (!r && !d->win0) r = vs_set_error(VS_ERR_NOMEM, "%s: %d files", fn, d->nshards);
    if (!r) d->win0[0] = 0;
    for (int i = 0; !r && i < d->nshards; i++) {
        int64_t n = 0;
        r = _vs_data_check_file(d, i, &n);
        d->win0[i + 1] = d->win0[i] + (n - 1) / d->T, d->tokens += n;
    }
    if (!r) d->N = d->win0[d->nshards];
    if (!r && d->N < d->B)
        r = vs_set_error(VS_ERR_INVALID, "%s: \"%s\" holds %lld rows of seq_len %lld + 1 tokens (%lld tokens in %d "
                         "files), fewer than a batch of %lld", fn, desc->files, (long long)d->N, (long long)d->T,
                         (long long)d->tokens, d->nshards, (long long)d->B);
    size_t bytes = (size_t)(d->rows * d->T) * sizeof(int32_t);
    if (!r) r = _vs_data_buffers(d, bytes);
    d->magic = _VS_DATA_LIVE;
    if (!r && desc->train && !desc->not_saved) { // attached: a position loaded before it opened applies now
        d->train = desc->train, desc->train->data = d;
        _vs_data_pos(d, desc->train->step_pos), desc->train->has_step_pos = 1;
        if (desc->train->has_data_pos) r = _vs_data_restore(d, desc->train->data_pos, _VS_DATA_POS_BYTES, fn, "the loaded checkpoint");
        desc->train->has_data_pos = 0;
    }
    if (!r && desc->prefetch >= 0) {
        int e = pthread_create(&d->th, NULL, _vs_data_thread, d);
        if (e) r = vs_set_error(VS_ERR_BACKEND, "%s: cannot start the read-ahead thread: %s", fn, strerror(e));
        else d->has_thread = 1;
    }
    if (r) {
        d->magic = _VS_DATA_DEAD;
        _vs_data_release(d);
        _vs_data_unmem(d, d);
        return r;
    }
    *out = d;
    return VS_OK;
}

VS_API vs_result vs_data_next(vs_data* d, vs_batch* out)
{
    const char* fn = "vs_data_next";
    _VS_TRY(_vs_data_gone(fn, d));
    if (!out) return vs_set_error(VS_ERR_NULL, "%s: out is NULL", fn);
    double t0 = _vs_now();
    _vs_data_slot* s = &d->slot[0];
    if (!d->has_thread) { // read here
        if (!d->failed) {
            vs_result r = _vs_data_read(d, d->pe, d->pw, s);
            d->read_s += _vs_now() - t0;
            if (r) d->failed = 1;
            else d->pe = s->next_epoch, d->pw = s->next_window;
        }
        if (d->failed) return vs_set_error(s->err, "%s", s->msg);
    } else {
        pthread_mutex_lock(&d->mu);
        double deadline = t0 + d->timeout;
        while (d->produced <= d->consumed && _vs_now() < deadline) {
            struct timespec dl = _vs_abs_deadline(deadline - _vs_now());
            pthread_cond_timedwait(&d->cv, &d->mu, &dl);
        }
        if (d->produced <= d->consumed) {
            pthread_mutex_unlock(&d->mu);
            return vs_set_error(VS_ERR_TIMEOUT, "%s: the read-ahead thread has not read batch %lld (epoch %lld, window "
                                "%lld) within %g s (vs_data_desc.timeout)", fn, (long long)d->batches,
                                (long long)d->ce, (long long)d->cw, d->timeout);
        }
        s = &d->slot[d->consumed % d->nslots];
        if (!s->err) d->consumed++; // (an error stays: every later call returns it, until a seek)
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        if (s->err) return vs_set_error(s->err, "%s", s->msg);
    }
    d->ce = s->next_epoch, d->cw = s->next_window;
    d->batches++;
    d->last_wait_s = _vs_now() - t0;
    d->wait_s += d->last_wait_s;
    memset(out, 0, sizeof *out);
    out->n = 2;
    for (int i = 0; i < 2; i++) {
        out->name[i] = d->names[i];
        out->dtype[i] = VS_I32;
        out->ndim[i] = 2;
        out->shape[i][0] = d->rows, out->shape[i][1] = d->T;
    }
    out->data[0] = s->tok, out->data[1] = s->tgt;
    out->dp_local = d->dp;
    return VS_OK;
}

VS_API vs_result vs_data_seek(vs_data* d, int64_t epoch, int64_t window)
{
    _VS_TRY(_vs_data_gone("vs_data_seek", d));
    if (epoch < 0 || window < 0 || window >= d->N)
        return vs_set_error(VS_ERR_INVALID, "vs_data_seek: epoch %lld, window %lld (epoch >= 0, window 0..%lld)",
                            (long long)epoch, (long long)window, (long long)d->N - 1);
    _vs_data_norm(d, &epoch, &window);
    pthread_mutex_lock(&d->mu);
    d->gen++;
    d->produced = d->consumed = 0;
    d->failed = 0;
    d->pe = d->ce = epoch, d->pw = d->cw = window;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    if (d->train) _vs_data_pos(d, d->train->step_pos), d->train->has_step_pos = 1; // (the state's position now)
    return VS_OK;
}

VS_API vs_result vs_data_query(const vs_data* d, vs_data_info* out)
{
    _VS_TRY(_vs_data_gone("vs_data_query", d));
    if (!out) return vs_set_error(VS_ERR_NULL, "vs_data_query: out is NULL");
    memset(out, 0, sizeof *out);
    out->nshards = d->nshards, out->tokens = d->tokens, out->windows = d->N, out->batches_per_epoch = d->N / d->B;
    out->rows = d->rows, out->dp_size = d->dp, out->dp_rank = d->dprank;
    out->epoch = d->ce, out->window = d->cw, out->batches = d->batches;
    out->wait_s = d->wait_s, out->last_wait_s = d->last_wait_s;
    vs_data* m = (vs_data*)d; // (the thread adds to read_s under the lock)
    pthread_mutex_lock(&m->mu);
    out->read_s = d->read_s;
    pthread_mutex_unlock(&m->mu);
    return VS_OK;
}

VS_API vs_result vs_data_window(const vs_data* d, int64_t epoch, int64_t k, int* file, int64_t* first_token)
{
    _VS_TRY(_vs_data_gone("vs_data_window", d));
    if (!file || !first_token) return vs_set_error(VS_ERR_NULL, "vs_data_window: %s is NULL", file ? "first_token" : "file");
    if (epoch < 0 || k < 0 || k >= d->N)
        return vs_set_error(VS_ERR_INVALID, "vs_data_window: epoch %lld, entry %lld (0..%lld)", (long long)epoch,
                            (long long)k, (long long)d->N - 1);
    _vs_data_locate(d, epoch, k, file, first_token);
    return VS_OK;
}

VS_API const char* vs_data_file(const vs_data* d, int file)
{
    if (_vs_data_gone("vs_data_file", d)) return NULL;
    if (file < 0 || file >= d->nshards)
        return vs_set_error(VS_ERR_INVALID, "vs_data_file: file %d (0..%d)", file, d->nshards - 1), (const char*)NULL;
    return d->path[file];
}

_VS_HL_PRIVATE int64_t _vs_data_batch(const vs_data* d) { return d->B; }

/* vs_train_reconfigure: the loader attached to the old state goes on with the
   new one: its DP rank and rows from the new mesh, at the position the moved
   state is at (nt->data_pos; what was read ahead is dropped). */
_VS_HL_PRIVATE vs_result _vs_data_rebind(vs_data* d, vs_train* nt)
{
    const char* fn = "vs_train_reconfigure";
    int thread = d->has_thread;
    if (thread) { // stopped while its buffers change
        pthread_mutex_lock(&d->mu);
        d->stop = 1;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->th, NULL);
        d->has_thread = 0, d->stop = 0;
    }
    for (int i = 0; d->slot && i < d->nslots; i++) _vs_data_unmem(d, d->slot[i].tok), _vs_data_unmem(d, d->slot[i].tgt);
    _vs_data_unmem(d, d->slot), _vs_data_unmem(d, d->raw);
    d->slot = NULL, d->raw = NULL;
    d->dp = nt->dp, d->dprank = nt->dp_rank, d->rows = d->B / nt->dp;
    d->train = nt, nt->data = d;
    vs_result r = _vs_data_buffers(d, (size_t)(d->rows * d->T) * sizeof(int32_t));
    if (!r && thread) {
        int e = pthread_create(&d->th, NULL, _vs_data_thread, d);
        if (e) r = vs_set_error(VS_ERR_BACKEND, "%s: cannot start the data loader's thread again: %s", fn, strerror(e));
        else d->has_thread = 1;
    }
    if (!r && nt->has_data_pos) r = _vs_data_restore(d, nt->data_pos, _VS_DATA_POS_BYTES, fn, "the moved state");
    nt->has_data_pos = 0;
    return r;
}

VS_API vs_result vs_data_free(vs_data* d)
{
    if (!d) return VS_OK;
    _VS_TRY(_vs_data_gone("vs_data_free", d));
    d->magic = _VS_DATA_DEAD;
    vs_train* t = d->train; // (attached: its world lives, and keeps the freed handle readable a while)
    _vs_data_release(d);
    if (t) vs_free_later(t->w, d);
    else _vs_data_unmem(d, d); // (its training state, maybe its world, ended: nothing of theirs is touched)
    return VS_OK;
}

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
