/* vescale_ddp.h - v0.1.0 (2026-11-23) - DDP (bucketed gradient sync overlapped
   with backward) and the DistributedOptimizer (ZeRO-1/2/3), on the device mesh of
   vescale_mesh.h. MIT license (end of file).

   Do this in *one* C or C++ file:
       #define VESCALE_IMPLEMENTATION        (every part), or
       #define VESCALE_DDP_IMPLEMENTATION    (this part only; the mesh
                                              implementation must then be in
                                              the same program)
       #include "vescale_ddp.h"
   Vendoring vescale_mesh.h + vescale_ddp.h is enough. VESCALE_STATIC (see
   vescale_mesh.h) implies the implementation here too.

   Platforms: POSIX.1-2008 with pthreads (tested on Linux/glibc); VESCALE_MPI:
   MPI-3; VESCALE_NCCL: CUDA 12+, NCCL 2.18+ and NVRTC (no nvcc needed).
   Link: -lpthread -lm; with VESCALE_MPI the MPI library (mpicc, or -lmpi); with
   VESCALE_NCCL -lcudart -lnccl -lnvrtc (NVRTC compiles the optimizer kernels at
   run time; -I/-L the CUDA directories). Installed: pkg-config vescale (or
   vescale-mpi, vescale-nccl); CMake find_package(vescale) and vescale::vescale.

   From C++ (no compound literals): `vs_ddp_desc dd = {}; dd.mesh = mesh;
   dd.zero = VS_ZERO_1; vs_ddp_init(&dd, &ddp);`, or C++20 designated
   initializers in declaration order. examples/mlp_dp_tp.c is a whole trainer.

   Topics (grep the markers; a public function is declared and defined under the
   same one):
       // >>version   vs_ddp_version
       // >>lr        learning-rate schedules
       // >>ddp       DDP and the distributed optimizer: the API
   Implementation only:
       // >>ddp-state the DDP's parameters, buckets and handle
       // >>kernels   the optimizer's elementwise kernels, one text for C and NVRTC
       // >>cuda      loading it (vescale_mesh.h's vs_kernels_get) and launching it
                      on the trainer's stream
       // >>agree     ranks checking they hold the same parameters (vs_ddp_finalize)

   Step by step (a trainer with its own forward/backward):

       vs_ddp* ddp;
       vs_ddp_init(&(vs_ddp_desc){ .mesh = mesh, .zero = VS_ZERO_1,
                                   .optim = { .kind = VS_OPTIM_ADAMW, .weight_decay = 0.1 } }, &ddp);
       for each parameter:   vs_ddp_add_param(ddp, &(vs_ddp_param_desc){ .name = "h0.w", .data = w,
                                                 .dtype = VS_F32, .ndim = 2, .shape = {768, 768} }, &idx);
       vs_ddp_finalize(ddp);                   // collective: buckets, optimizer state
       loop:
           vs_ddp_zero_grad(ddp);
           forward with vs_ddp_param(ddp, i) (DDP owns the parameters from now on)
           backward: add each gradient into vs_ddp_grad(ddp, i), then
                     vs_ddp_grad_ready(ddp, i)  // a full bucket starts reducing now
           vs_ddp_finish_grad_sync(ddp);
           vs_ddp_clip_grad_norm(ddp, 1.0, &norm);
           vs_ddp_step(ddp, vs_lr_at(&sched, step));

   With `.max_grad_norm = 1.0` in the desc the last three are one vs_ddp_step
   (it ends the sync and clips; vs_ddp_grad_norm reads the norm).

   Plain data parallel needs no mesh: `.world = world` instead of `.mesh` is a DP
   over all the world's ranks.

   HSDP (shard within a host, replicate across hosts): a mesh with dims "DPR"
   (replicate) and "DPS" (shard), PP x DPR x DPS x TP say, is found by name
   (other names: vs_ddp_desc.dp_replicate_dim and dp_dim):

       vs_mesh_init(world, &(vs_mesh_desc){ .shape = {2, 8}, .dim_names = {"DPR", "DPS"} }, &mesh);
       vs_ddp_init(&(vs_ddp_desc){ .mesh = mesh, .zero = VS_ZERO_1 }, &ddp);

   - ZeRO-1/2: a bucket's gradients are reduce-scattered over DPS, the owned
     range then all-reduced over DPR (the average over all DPR x DPS ranks);
     optimizer state sharded over DPS, the same on every replica; the updated
     range all-gathered over DPS.
   - ZeRO-0: one all-reduce over DPR x DPS.
   - ZeRO-3: parameters sharded over DPS, gathered over DPS only; gradients
     reduced as ZeRO-1/2.
   - Parameters are Replicate along both dims; the clip's norm and checkpoints
     (vs_ddp_param_info.primary) take each element once, from replica 0.

   A trainer with its own flat buffers (llm.c style) registers views into them
   instead, each with its name: `.storage = params + off, .grad_storage =
   grads + off, .ready_group = layer + 1` (no copy, a bucket a layer wherever
   its tensors lie; rules at vs_ddp_param_desc), or a kind's tensors for all L
   layers in one call (`.name = "h.%d.mlp.fc.weight", .layers = L`), marks a layer's
   gradients ready with vs_ddp_group_ready(ddp, layer + 1), may keep its own
   zero_grad (vs_ddp_desc.trainer_zero_grad), and calls vs_ddp_wait_params
   after each ZeRO step before anything reads parameters (VESCALE_DEBUG=params
   makes a read before it fault, naming the parameter).
   examples/flat_trainer.c is such a trainer, and its port.

   Semantics
   - Buckets hold the gradients of parameters in reverse registration order (the
     order backward produces them), up to bucket_bytes each, padded so every DP
     rank owns an equal range. A parameter's gradient is a view into its bucket.
   - Gradients are averaged over DP. A Partial placement in a parameter's
     placements means its value is replicated along that mesh dim but its gradient
     is a partial sum there (sequence-parallel norms over TP): DDP sums it over
     that dim too.
   - DP 1 (one GPU, or a DP-1 slice of a TP/PP mesh; HSDP: and one replica):
     the average is the gradient itself, so no reduction call is made on any
     transport; ZeRO's copy or cast into the f32 accumulator is all there is.
   - ZeRO-0: all-reduce; every rank steps every element. ZeRO-1: reduce-scatter;
     optimizer state and fp32 master weights only for the owned 1/DP range; the
     updated parameters are all-gathered bucket by bucket in the background
     (vs_ddp_param waits for its bucket: the gathers overlap the next forward). ZeRO-2: as ZeRO-1, and a rank keeps only
     its range of each bucket's gradient: full-size gradients live in a small pool
     of staging buffers reused bucket after bucket (so vs_ddp_grad must be asked
     again each backward pass), and each pass's reduced shard is added to the
     owned range (gradient accumulation reduces every micro-batch).
   - ZeRO-3: as ZeRO-2, and parameters (with their masters and optimizer
     state) live only as the owned range between uses: a trainer gathers a
     ready group around its use (vs_ddp_gather / vs_ddp_release, prefetched in
     the order the first step used); the rules are at vs_ddp_gather. The
     owned shards may live in the trainer's memory (vs_ddp_set_owned_storage);
     registration stays at 1/DP with data NULL and vs_ddp_write_param.
   - Gradient accumulation (ZeRO-0/1/3): vs_ddp_set_sync(ddp, 0) before the backward
     of a micro-batch that must not reduce; gradients add up in the buckets until
     a backward with sync on. Several synced passes before a step also add up
     (ZeRO-1 and TP-partial buckets keep an f32 accumulator of their reduced owned
     range for this, used only from the second pass on). vs_ddp_finish_grad_sync ends every backward pass. ZeRO-2
     with no_overlap still reduces early when it runs out of staging buffers.
   - Introspection (checkpoints, planners): vs_ddp_query_desc gives the desc with
     its defaults resolved; vs_ddp_query_param_info a parameter's global shape,
     placements, local shape and global offset, and the flat range of its local
     shard this rank owns under ZeRO; vs_ddp_grad_synced_owned the averaged
     gradient of that range, vs_ddp_optim_state its optimizer state and master
     weights (f32), to save in global form or restore.
   - Buckets are reduced in bucket order on every rank, whatever order the
     gradients become ready in, so ranks never disagree on the collective order.
   - Buffers: host memory on the threads and MPI transports. On NCCL (built with
     VESCALE_NCCL; link -lcudart -lnccl -lnvrtc) every DDP buffer is device
     memory:
     - vs_ddp_param / vs_ddp_grad / vs_ddp_grad_synced return device pointers;
       vs_ddp_param_desc.data may be host or device memory.
     - The optimizer (AdamW, SGD), the f32 casts, accumulation and clipping run
       as CUDA kernels on desc.stream (the stream backward and forward use),
       written once (>>kernels): the host path runs the same text compiled as C;
       NVRTC compiles it for the rank's GPU in vs_ddp_finalize (once per process
       and GPU architecture, shared by every vs_ddp: vescale_mesh.h's
       vs_kernels_get), so a trainer built by gcc needs no nvcc.
     - A bucket's collective waits (cudaStreamWaitEvent) for the work already on
       desc.stream; work enqueued on desc.stream after vs_ddp_finish_grad_sync
       (or vs_ddp_param, after a ZeRO step) waits for the collectives
       (vs_wait_stream).
     - The host never waits for the collectives: a step's one host wait is the
       trainer's own (its loss: vs_sync_stream gives that wait the
       communicator's deadline). A clip reads its norm (one host wait).
     - A fault in a collective the host did not wait for (a peer that never
       arrives, NCCL's asynchronous error) is reported by the next DDP call that
       communicates or synchronizes; the mesh's watchdog aborts the communicator
       at the deadline, so desc.stream never hangs.
     - A custom step gets device pointers and vs_step_args.stream.
   One thread uses a vs_ddp at a time.

   Rules (each broken one is an error with a message naming the value, never a
   crash or a silent change)
   - Order of calls: init, add_param..., finalize, then per step zero_grad,
     backward (vs_ddp_grad / vs_ddp_grad_ready), finish_grad_sync, clip (optional),
     step (which does the two before it with vs_ddp_desc.finish_in_step and
     max_grad_norm). Out of order is VS_ERR_STATE: add_param or set_bucket_bytes after
     finalize, finalize twice, anything that needs buffers before finalize, a
     gradient marked ready twice in one pass, zero_grad/set_sync/clip/step during
     a backward pass, finish_grad_sync twice with no backward pass between, step
     without newly synchronized gradients.
   - Ranks must agree: vs_ddp_finalize compares the DDP settings and every
     parameter (name, dtype, global shape, placements, group, no_decay) over all
     mesh dims but the pipeline dim; a difference is VS_ERR_MISMATCH on every
     rank, naming the parameter, the field and the world ranks.
   - Sizes: a parameter whose element count or f32 byte size overflows 64 bits is
     refused by vs_ddp_add_param (VS_ERR_INVALID naming it and its shape).
   - Numbers: optimizer hyper-parameters are checked by vs_ddp_init (ranges at
     vs_optim_desc), lr by vs_ddp_step (finite, >= 0), max_norm by the clip (finite;
     <= 0 only measures), vs_ddp_desc.max_grad_norm by vs_ddp_init (finite, >= 0),
     schedules by vs_lr_check (vs_lr_at gives NaN for a bad one, which vs_ddp_step
     then refuses). Zero in a desc means "default" unless
     its `_set` flag says the zero is meant (beta1_set, beta2_set, eps_set,
     lr_scale_set): so beta1 = 0 and frozen groups (lr_scale = 0) are possible.
   - Non-finite gradients: when the clip's global norm is NaN or inf, the next
     vs_ddp_step is skipped on every rank and counted by vs_ddp_skipped_steps
     (with error_if_nonfinite the clip also fails); parameters stay as they were.
   - Lifetimes: a vs_ddp holds its mesh. Free the DDP, then the mesh: vs_mesh_free
     on a mesh (or the parent of a submesh) that a DDP still uses is VS_ERR_STATE.
     vs_ddp_free waits for the collectives it has in flight.
*/
/* Before the guard, so a later include with VESCALE_IMPLEMENTATION still works. */
/* VESCALE_STATIC: every part included is implemented here, static inline. */
#if defined(VESCALE_STATIC) && !defined(VESCALE_IMPLEMENTATION)
#define VESCALE_IMPLEMENTATION
#endif
#if defined(VESCALE_IMPLEMENTATION) && !defined(VESCALE_DDP_IMPLEMENTATION)
#define VESCALE_DDP_IMPLEMENTATION
#endif

#ifndef VESCALE_DDP_INCLUDED
#define VESCALE_DDP_INCLUDED

#include "vescale_mesh.h"

#ifdef __cplusplus
extern "C" {
#endif

// >>version ------------------------------------------------------------------
/* The VESCALE_VERSION_NUMBER this part was built with. */
VS_API int vs_ddp_version(void);

// >>lr -----------------------------------------------------------------------

typedef enum vs_lr_kind {
    VS_LR_CONSTANT = 0,
    VS_LR_COSINE, // warmup, then cosine from lr to min_lr over total_steps
    VS_LR_LINEAR, // warmup, then linear from lr to min_lr over total_steps
    VS_LR_STEP    // warmup, then lr * gamma^(floor((step - warmup) / step_size))
} vs_lr_kind;

/* A learning-rate schedule: a few numbers, saved as they are by checkpoints.
   Valid (vs_lr_check): a known kind; lr and min_lr finite and >= 0; warmup_steps,
   total_steps and step_size >= 0; cosine/linear: total_steps > 0 and >= warmup_steps
   (total_steps counts the warmup); step decay: gamma finite and >= 0 (step_size 0:
   no decay). */
typedef struct vs_lr_schedule {
    vs_lr_kind kind;
    double lr, min_lr;
    int64_t warmup_steps; // linear from lr/warmup_steps to lr over the first steps
    int64_t total_steps;  // cosine/linear: steps until min_lr (warmup included)
    int64_t step_size;    // step decay
    double gamma;         // step decay factor
} vs_lr_schedule;

/* VS_OK, or VS_ERR_INVALID (VS_ERR_NULL) naming the first bad field. Call it once
   when the schedule is built (or loaded): vs_lr_at cannot return a vs_result. */
VS_API vs_result vs_lr_check(const vs_lr_schedule* s);
/* The learning rate of step `step` (0-based, any step up to INT64_MAX). A schedule
   vs_lr_check rejects, a NULL schedule or a negative step give NaN, with
   vs_last_error() saying why; NaN is never silently a usable rate: vs_ddp_step
   refuses it. */
VS_API double vs_lr_at(const vs_lr_schedule* s, int64_t step);

// >>ddp ----------------------------------------------------------------------

#define VS_DDP_MAX_GROUPS 16

typedef enum vs_zero_stage { VS_ZERO_0 = 0, VS_ZERO_1 = 1, VS_ZERO_2 = 2, VS_ZERO_3 = 3 } vs_zero_stage;
typedef enum vs_optim_kind { VS_OPTIM_ADAMW = 0, VS_OPTIM_SGD, VS_OPTIM_CUSTOM } vs_optim_kind;

/* What a custom step sees: one parameter's slice this rank owns, as f32. */
typedef struct vs_step_args {
    const char* name;
    int index;       // parameter index
    int64_t offset;  // first element of the slice within the parameter's local shard
    int64_t n;
    float* param;       // update in place (fp32 master weights for half parameters)
    const float* grad;  // averaged (and clipped) gradient
    float* state[2];    // two f32 state slots, zero at the first step
    double lr, weight_decay;
    int64_t step;       // 1 at the first step
    void* user;
    void* stream;       // device buffers: the cudaStream_t to enqueue on (else NULL)
} vs_step_args;
typedef vs_result (*vs_step_fn)(const vs_step_args* a);

/* Zero means "default" in these descs, as everywhere in vescale, so that
   `.optim = {.kind = VS_OPTIM_ADAMW}` works; but beta1 = 0, eps = 0 or a frozen
   group (lr_scale = 0) are real choices. A field with a default therefore has a
   `_set` flag: with the flag 1 the value is taken as given, zero included; with
   the flag 0 a zero takes the default (and any other value is taken as given).
   Why flags, not a sentinel: a NaN default would break zero-initialized descs,
   and -0.0 does not survive -ffast-math (-fno-signed-zeros). */
typedef struct vs_optim_group {
    double lr_scale;     // lr multiplier, finite, >= 0 (0 and !lr_scale_set: 1)
    double weight_decay; // this group's decay, finite, >= 0
    int lr_scale_set;    // 1: lr_scale as given; lr_scale = 0 freezes the group
} vs_optim_group;

/* Checked by vs_ddp_init (VS_ERR_INVALID naming the field): AdamW beta1 and beta2
   in [0, 1), eps finite and >= 0; weight decays and lr_scales finite and >= 0; SGD
   momentum finite and >= 0, nesterov only with momentum > 0. Fields of the other
   optimizer are not looked at. */
typedef struct vs_optim_desc {
    vs_optim_kind kind;
    double beta1, beta2, eps; // AdamW (zero and not _set: 0.9, 0.999, 1e-8)
    int beta1_set, beta2_set, eps_set; // 1: the value above as given, zero included
    double weight_decay;      // group 0 (AdamW decoupled; SGD adds wd * p to the gradient)
    double momentum;          // SGD
    int nesterov;             // SGD
    int ngroups;              // groups 1..ngroups-1 from `groups` (group 0 is the above)
    vs_optim_group groups[VS_DDP_MAX_GROUPS];
    vs_step_fn step; // VS_OPTIM_CUSTOM
    void* user;
} vs_optim_desc;

/* The defaults of vs_ddp_desc (vs_ddp_query_desc returns them resolved). */
#define VS_DDP_DEFAULT_BUCKET_BYTES ((int64_t)32 << 20) // 32 MiB
#define VS_DDP_DEFAULT_ZERO2_BUFFERS 2

typedef struct vs_ddp_desc {
    vs_mesh* mesh;
    /* Plain data parallel without a mesh: with mesh NULL, a DP over all of the
       world's ranks (the DDP makes a 1-D mesh and frees it; vs_ddp_query_desc
       gives it as `mesh`, world NULL). Both set: VS_ERR_INVALID. */
    vs_world* world;
    const char* dp_dim;   // NULL: "DP" (or the only dim of a 1-D mesh)
    const char* pp_dim;   // NULL: "PP" when the mesh has it (stages hold distinct parameters)
    /* HSDP (a 2-D DP: replicate across hosts x shard within a host): the
       replicate dim, dp_dim then the shard dim. NULL: "DPR" when the mesh has
       both "DPR" and "DPS" (dp_dim then defaults to "DPS"), else none (a plain
       DP over dp_dim; a mesh naming only one of the two: VS_ERR_INVALID).
       ZeRO-1/2/3 shard over dp_dim only; see "HSDP" above. */
    const char* dp_replicate_dim;
    int64_t bucket_bytes; // 0: VS_DDP_DEFAULT_BUCKET_BYTES (vs_ddp_set_bucket_bytes rejects 0); negative is an error
    vs_zero_stage zero;
    int no_overlap;      // 1: reduce only in vs_ddp_finish_grad_sync
    int grad_fp32;       // f16/bf16 parameters accumulate gradients in f32
    /* Staging buffers (0: VS_DDP_DEFAULT_ZERO2_BUFFERS), each the size of the
       largest bucket that uses one: ZeRO-2's gradients; trainer-owned buckets
       with `staged` 1 or partial over TP (their gradients, and with `staged`
       their ZeRO-1 all-gathers); the host's all-gathers under
       VESCALE_DEBUG=params. When all are held, the next bucket waits for one.
       At most one a bucket is made (below ZeRO-3: a bucket holds one at a time,
       so more would never be used). */
    int zero2_buffers;
    /* Trainer-owned buckets (vs_ddp_param_desc.storage), not partial: 0
       (default) reduces each parameter's gradient where it lies, in one group
       (ZeRO-0: an all-reduce a parameter; ZeRO-1: a reduce a piece, each piece
       to the DP rank that owns it), no copy; 1 packs the bucket into a staging
       buffer and reduces that with one call (a copy in, and for ZeRO-0 one
       out), and ZeRO-1 gathers the updated bucket through one too (written
       into the parameters when waited for). bench/ddp_ext measures both. */
    int staged;
    /* Who zeroes trainer-owned gradients (vs_ddp_param_desc.grad_storage), once
       a step, never twice:
       - 0 (default): DDP, right after their reduction where the reduced values
         move to its accumulator (ZeRO-1, partial over TP), else in
         vs_ddp_zero_grad (ZeRO-0: the buffer holds the average until then).
       - 1: the trainer, as its own zero_grad did before the port: DDP never
         writes zeros into them, and the trainer zeroes them before every
         backward pass that is reduced (ZeRO-1: after the reduction they hold
         unspecified values; f32 ones reduced once a step keep the backward's,
         as the reduction lands in DDP's accumulator).

       DDP-owned gradients are DDP's to zero either way (vs_ddp_zero_grad); for
       trainer-owned ones vs_ddp_zero_grad then only waits for the gathers, so
       a trainer whose parameters are all its own and that calls
       vs_ddp_wait_params may leave it out. */
    int trainer_zero_grad;
    /* What vs_ddp_step does first, so that a trainer's step is one call (the
       same results as the explicit calls, bit for bit):
       - finish_in_step 1: ends the open backward pass (vs_ddp_finish_grad_sync)
         when the trainer has not;
       - max_grad_norm > 0: also clips the gradients to that global norm, as
         vs_ddp_clip_grad_norm (unless the trainer clipped since the sync: with
         loss scaling, clip with vs_ddp_clip_grad_norm_ex's unscale yourself),
         and implies finish_in_step; vs_ddp_grad_norm reads the norm. 0: no
         clip in the step; negative, NaN or inf: VS_ERR_INVALID. */
    int finish_in_step;
    double max_grad_norm;
    vs_optim_desc optim;
    void* stream;        // device buffers: the cudaStream_t backward and forward run on (NULL: default stream)
    /* ZeRO-3 (see "ZeRO-3" above vs_ddp_gather); zero with the flag 0 takes the default. */
    int reshard_after_forward, reshard_after_forward_set; // 0 or 1 (default 1): a release before the group's
                                                          // backward frees its gathered buffer (0: kept until then)
    int prefetch, prefetch_set; // >= 0 (default 1): groups gathered ahead in the order the first step gathered
} vs_ddp_desc;

typedef struct vs_ddp_param_desc {
    const char* name;
    const void* data; // initial value of this rank's shard (copied; NULL: zeros; ZeRO-3: nothing kept, vs_ddp_write_param)
    vs_dtype dtype;   // f32, bf16 or f16
    int ndim;
    int64_t shape[VS_TENSOR_MAX_DIMS];           // global shape
    vs_placement placements[VS_MESH_MAX_DIMS]; // per mesh dim (zero: Replicate)
    int group;    // optimizer group
    int no_decay; // no weight decay (norms, biases)
    int tied_copy; // another PP stage registers the same (tied) parameter and its gradients are
                   // summed between the stages (vs_pipe_tie_grads): left out of the clip norm here,
                   // so the norm counts it once
    /* Trainer-owned storage (both or neither; NULL: DDP allocates and owns):
       `storage` is this rank's local shard in the parameter's dtype, `grad_storage`
       its gradient in the gradient dtype (vs_ddp_grad_dtype: f32 with grad_fp32).
       DDP uses them in place, with no copy: vs_ddp_param / vs_ddp_grad return
       them, the optimizer steps them, and many parameters may be views into one
       flat parameter buffer and one flat gradient buffer (each registered with
       its own name, so checkpoints name each). The rules:
       - alignment: the element size; on NCCL both are device memory (a plain
         host pointer is VS_ERR_INVALID naming the parameter);
       - both exist at vs_ddp_add_param: a trainer that allocates its
         gradient buffer lazily (llm.c does, at the first backward) allocates
         it before registering;
       - `storage` holds the initial value at vs_ddp_finalize (`data` must be
         NULL); the trainer keeps both alive until vs_ddp_free and frees them;
       - ZeRO-0: after vs_ddp_finish_grad_sync the gradient holds the average.
       - ZeRO-1: the reduced owned range goes straight to DDP's f32 accumulator
         (vs_ddp_grad_synced_owned) and the trainer's gradient is cleared for
         the next pass (vs_ddp_desc.trainer_zero_grad: by the trainer); the
         step updates the owned range of `storage` in place and the rest
         arrives by all-gathers straight into `storage`, bucket after bucket
         in registration order (the first layer's first), which the step
         starts and does not wait for: vs_ddp_wait_params (or vs_ddp_param
         for one bucket) waits (read no parameter before it); ZeRO-2 is
         refused (the gradient buffer is the trainer's, full size: ZeRO-2
         would save nothing);
       - gradients are reduced and parameters gathered where they lie, a
         group of calls a bucket (vs_ddp_desc.staged: packed into staging
         buffers instead, one call a bucket); a bucket holds only
         trainer-owned parameters or only DDP-owned ones. */
    void* storage;
    void* grad_storage;
    /* Buckets by readiness: the parameters with one nonzero ready_group share
       one bucket wherever they were registered (bucket_bytes notwithstanding;
       a dtype change splits it), and a bucket never spans two groups: e.g. one
       group a layer, whatever the memory layout. Buckets reduce in the reverse
       order of their groups' first registrations (register in forward order).
       0: buckets by bucket_bytes, in reverse registration order. */
    int ready_group;
    /* One kind's tensors for several layers in one call (llm.c's layout: a
       kind's tensor for every layer, one after another). 0 or 1: one tensor.
       layers = L > 1 registers L parameters of this shape:
       - parameter l is named by `name` with its one "%d" replaced by l
         ("h.%d.attn.qkv.weight" -> "h.3.attn.qkv.weight"); no other '%';
       - its `storage`, `grad_storage` and `data` (those given) start l local
         shards after the given ones;
       - its ready_group is ready_group + l when ready_group is nonzero;
       - `index` returns parameter 0's; the others follow it.
       A failure registers none of them. */
    int layers;
} vs_ddp_param_desc;

typedef struct vs_ddp_memory {
    size_t params;       // parameter buffers
    size_t grads;        // gradient buffers (ZeRO-2: owned ranges + staging pool)
    size_t optim_state;  // moments / momentum
    size_t master;       // fp32 master weights of half parameters
    size_t padding;      // elements of padding in the buckets (counted in the above)
    size_t gathered;     // ZeRO-3: the pool of gathered parameter buffers (not in params), each the size of
                         // the largest bucket: the groups held at once (see vs_ddp_gather)
    size_t grad_staging; // the staging pool's part of grads (ZeRO-2/3: full-size gradient buffers)
    size_t scratch;      // DDP's f32 conversion space (the largest bucket; ZeRO-3: its shard) and, on a
                         // device, the clip norm's partial sums (in the buffers' memory, not in the above)
    size_t tables;       // DDP's host bookkeeping: its handle, the parameter and bucket tables, the names,
                         // the pools' lists, the recorded gather order (not in the above)
} vs_ddp_memory;

typedef struct vs_ddp vs_ddp;

/* One parameter as DDP holds it (vs_ddp_query_param_info): its place in the
   global tensor, and the part of it this rank steps and keeps optimizer state
   for. "Flat index" i counts the elements of this rank's local shard in row-major
   order: i = sum over dims of l[k] * stride[k], strides from local_shape; the
   element is the global tensor's element at (offset[k] + l[k]) per dim. So a
   flat range [owned_begin, owned_end) of a state (vs_ddp_optim_state) maps to
   local coordinates, and through `offset` to global ones: that is how a
   checkpoint writes optimizer state in its global, unflattened form. */
typedef struct vs_ddp_param_info {
    const char* name;    // as registered (DDP's copy: valid until vs_ddp_free)
    int index;           // the parameter index
    vs_dtype dtype;      // the parameter's dtype: f32, bf16 or f16
    vs_dtype grad_dtype; // the gradient's dtype in the buckets (vs_ddp_grad_dtype)
    int ndim;
    int64_t shape[VS_TENSOR_MAX_DIMS];         // global shape (entries past ndim: 0)
    vs_placement placements[VS_MESH_MAX_DIMS]; // per mesh dim as registered; past the mesh's dims: Replicate
    int64_t local_shape[VS_TENSOR_MAX_DIMS];   // this rank's shard (vs_layout_local of the mesh layout)
    int64_t offset[VS_TENSOR_MAX_DIMS];        // global index of the shard's first element per dim (an
                                               // empty shard: the dim's size, as vs_layout_local)
    int64_t numel;       // elements of the global tensor
    int64_t local_numel; // elements of the local shard (vs_ddp_local_numel): the product of local_shape
    int group;           // optimizer group, as registered
    int no_decay;        // no weight decay, as registered
    int has_master;      // 1: fp32 master weights are kept (bf16/f16 parameters): VS_DDP_STATE_MASTER
    int primary;         // 1: this rank's copy of its owned range is the one a checkpoint saves. Over
                         // the ranks with primary 1 (of one pipeline stage) the owned ranges, mapped to
                         // global indices, cover each element of the parameter exactly once. It is the
                         // rank at coordinate 0 along every mesh dim but PP where the parameter is not
                         // sharded: replicated or partial dims (HSDP's replicate dim too), and the DP dim
                         // under ZeRO-0 (every DP rank owns everything there; under ZeRO-1/2 the DP ranks
                         // own disjoint ranges)
    /* Set by vs_ddp_finalize; -1 before it. */
    int bucket;            // the gradient bucket holding it (buckets go in reverse registration order)
    int64_t bucket_offset; // element offset of the local shard in that bucket
    int64_t owned_begin;   // [owned_begin, owned_end): the flat range of the local shard this rank
    int64_t owned_end;     // steps and keeps optimizer state and master weights for. ZeRO-0: all of it,
                           // [0, local_numel). ZeRO-1/2: its part of this rank's 1/DP (HSDP: 1/DPS) range of the
                           // bucket, often empty (owned_begin == owned_end); the DP ranks' ranges
                           // partition [0, local_numel) in DP rank order, with no gap or overlap
    int64_t owned_offset;  // where element owned_begin lives in this rank's owned range of the bucket
                           // (the index into the bucket's f32 state arrays); 0 for an empty range
} vs_ddp_param_info;

/* A range of one parameter's flattened local shard in DDP's memory (what
   vs_ddp_grad_synced_owned and vs_ddp_optim_state give). */
typedef struct vs_ddp_span {
    void* data;         // the element at flat index `begin` (NULL when the range is empty); device memory with
                        // device buffers (NCCL)
    vs_dtype dtype;     // of the elements at data
    int64_t begin, end; // flat indices into the local shard (vs_ddp_param_info): [begin, end)
} vs_ddp_span;

/* The optimizer state of a parameter, for vs_ddp_optim_state. Every state is f32,
   one value per element of the parameter, zero before the first step. */
typedef enum vs_ddp_state {
    VS_DDP_STATE_NONE = 0,   // not a state (an error)
    VS_DDP_STATE_MASTER,     // fp32 master weights of bf16/f16 parameters (f32 parameters have none: they
                             // are stepped in place, read them with vs_ddp_param)
    VS_DDP_STATE_EXP_AVG,    // AdamW first moment m (torch's exp_avg)
    VS_DDP_STATE_EXP_AVG_SQ, // AdamW second moment v (torch's exp_avg_sq)
    VS_DDP_STATE_MOMENTUM,   // SGD momentum buffer (only with momentum > 0; torch's momentum_buffer)
    VS_DDP_STATE_CUSTOM0,    // VS_OPTIM_CUSTOM: vs_step_args.state[0]
    VS_DDP_STATE_CUSTOM1     // VS_OPTIM_CUSTOM: vs_step_args.state[1]
} vs_ddp_state;

/* Checks the desc (optimizer numbers: see vs_optim_desc; the dims: each a dim
   of the mesh, HSDP's replicate dim neither dp_dim nor pp_dim and never on a
   1-D mesh, a mesh with only one of "DPR" and "DPS" named) and registers the
   DDP with the mesh: vs_mesh_free refuses (VS_ERR_STATE) until vs_ddp_free.
   A refusal is VS_ERR_INVALID naming the value, with nothing made. */
VS_API vs_result vs_ddp_init(const vs_ddp_desc* desc, vs_ddp** out);
/* Bucket size in bytes, before vs_ddp_finalize: bytes must be > 0 (this is how to
   ask for an explicit size; a zero in vs_ddp_desc means the default). */
VS_API vs_result vs_ddp_set_bucket_bytes(vs_ddp* d, int64_t bytes);
/* Registers a parameter; *index (may be NULL) gets its index. Before finalize
   (after it: VS_ERR_STATE). A shape whose element count, or byte size as f32
   (optimizer state and master weights are f32), does not fit in 64 bits is
   VS_ERR_INVALID naming the parameter and its shape. */
VS_API vs_result vs_ddp_add_param(vs_ddp* d, const vs_ddp_param_desc* p, int* index);
/* Builds buckets, parameter buffers and optimizer state. Collective over the mesh.
   First it checks that the ranks agree, over every mesh dim but the pipeline dim
   (DP, and TP where parameters are sharded, replicated or partial alike): the
   DDP settings (zero stage, bucket_bytes, grad_fp32, optimizer kind, staged)
   and, in registration order, each parameter's name, dtype, global shape,
   placements, group, no_decay, trainer-owned storage or not, and ready_group.
   A disagreement is VS_ERR_MISMATCH on every rank, naming
   the first differing parameter (index and name), the field, and two world ranks
   with their values. */
VS_API vs_result vs_ddp_finalize(vs_ddp* d);
VS_API int vs_ddp_num_params(const vs_ddp* d);
/* The parameter's local shard (its dtype), owned by DDP after finalize. After a
   ZeRO step it completes that bucket's all-gather: on device buffers in stream
   order (work enqueued on desc.stream after the call sees the gathered
   parameters; the host does not wait), else on the host. Ask again after each
   step. With trainer-owned storage: that pointer (the bucket's gathered values
   written in first). */
VS_API void* vs_ddp_param(vs_ddp* d, int index);
/* Makes every parameter current after a ZeRO step: the all-gathers of the
   updated ranges are completed (device: in stream order on desc.stream, no
   host wait; host transports: waited for) and, for trainer-owned storage,
   written into it. VS_OK at once under ZeRO-0.

   Needed before the next forward or an evaluation when parameters are read
   through pointers kept from before the step (trainer-owned storage, or a
   vs_ddp_param pointer kept across steps): without it such a read sees stale
   or half-gathered values. vs_ddp_param, vs_ddp_zero_grad, vs_ddp_synchronize
   and the next step wait too.

   A missed wait, with VESCALE_DEBUG=params:
   - host: the pages of the parameters being gathered are inaccessible until
     the wait (a read faults with a message naming the parameter and this
     function). mprotect covers whole pages only: the rest of a stale range (a
     parameter smaller than a page, a layernorm's weight, or the ends of a
     larger one that share a page) holds NaN until the wait instead, and the
     clip's non-finite norm (vs_ddp_clip_grad_norm) then names the parameter
     whose gather was still in flight when the backward began. These gathers
     go through staging buffers (zero2_buffers).
   - device: the stale ranges are filled with NaN until the gathered values
     land. */
VS_API vs_result vs_ddp_wait_params(vs_ddp* d);
/* Blocks the host until the DDP's work is done: every bucket's parameter
   all-gather in flight (ZeRO) and, on device buffers, everything it queued on
   its stream (the last step's optimizer kernels and casts). Then the
   parameters, gradients and optimizer state may be read from the host or any
   stream (vs_ckpt_save_ddp calls it before it copies). VS_OK at once when
   nothing is pending. */
VS_API vs_result vs_ddp_synchronize(vs_ddp* d);
/* The gradient view to add into (vs_ddp_grad_dtype); asking for it starts a
   backward pass. ZeRO-2: valid for the current backward pass only. NULL with
   vs_last_error() on error. */
VS_API void* vs_ddp_grad(vs_ddp* d, int index);
/* The synchronized gradient after vs_ddp_finish_grad_sync, to read, as the
   whole local shard (vs_ddp_grad_dtype). Which part holds the averaged values:
   - ZeRO-0: every element;
   - ZeRO-1: only the owned range [owned_begin, owned_end) of vs_ddp_param_info;
     the rest is this rank's own, unreduced gradient (the reduce-scatter gives
     each rank its range only).

   NULL (VS_ERR_UNSUPPORTED) where the reduced values live only in the f32
   accumulator: ZeRO-2, ZeRO-1 on trainer-owned storage, several synced passes,
   or a ZeRO-0 bucket partial over TP after several passes. For the averaged
   values under every stage use vs_ddp_grad_synced_owned. */
VS_API const void* vs_ddp_grad_synced(vs_ddp* d, int index);
/* The averaged (and, after vs_ddp_clip_grad_norm, clipped) gradient of exactly
   the owned range of parameter `index`, under every ZeRO stage:
   - out->begin, out->end: vs_ddp_param_info's owned_begin and owned_end;
   - out->data: the gradient of element begin;
   - out->dtype: vs_ddp_grad_dtype, or f32 where the reduced values are summed
     in an f32 accumulator (ZeRO-2 and ZeRO-1 on trainer-owned storage always;
     ZeRO-1, and ZeRO-0 buckets partial over TP, from a second synced pass
     before a step).

   To read, until the next backward pass or vs_ddp_zero_grad; vs_ddp_step leaves
   it as the gradient it used. Errors: VS_ERR_STATE before finalize, during a
   backward pass, or with no synchronized gradients (nothing since zero_grad, or
   the last pass ran with vs_ddp_set_sync(d, 0)); VS_ERR_INVALID for a bad index.
   Device buffers: a device pointer; work on desc.stream may still write it, so
   synchronize that stream before reading it from another. */
VS_API vs_result vs_ddp_grad_synced_owned(vs_ddp* d, int index, vs_ddp_span* out);
VS_API vs_dtype vs_ddp_grad_dtype(const vs_ddp* d, int index);
VS_API int64_t vs_ddp_local_numel(const vs_ddp* d, int index);
/* Zeroes DDP's own gradients and accumulators, and the trainer-owned ones
   unless vs_ddp_desc.trainer_zero_grad, once a step: not again where DDP
   cleared them since the last backward pass began (after a ZeRO-1 reduction,
   or an earlier vs_ddp_zero_grad), so gradients written outside a backward
   pass (before the next vs_ddp_grad / vs_ddp_grad_ready) are not cleared.
   Waits for a ZeRO step's gathers first. Not during a backward pass. */
VS_API vs_result vs_ddp_zero_grad(vs_ddp* d);
/* 0: the next backward accumulates without reducing (ZeRO-0/1/3; ZeRO-3's
   memory at vs_ddp_gather; ZeRO-2: VS_ERR_UNSUPPORTED). */
VS_API vs_result vs_ddp_set_sync(vs_ddp* d, int sync);
/* The parameter's gradient is complete for this backward pass (a second time in
   one pass: VS_ERR_STATE). Buckets reduce in bucket order (the reverse of
   registration): a gradient that completes a bucket while an earlier bucket
   is still open waits for it, and the first such wait of a DDP is logged at
   warn, naming both tensors (a tied embedding registered where its gradient
   does not complete is the usual cause). VESCALE_LOG=debug logs each
   bucket's launch with its tensors. */
VS_API vs_result vs_ddp_grad_ready(vs_ddp* d, int index);
/* vs_ddp_grad_ready for every parameter registered with ready_group `group`
   (vs_ddp_param_desc.ready_group; a layer's, say): a port marks a layer ready
   in one call, with no table of indices. VS_ERR_INVALID for group 0 or a
   group no parameter declares, VS_ERR_STATE naming a parameter of the group
   already marked ready in this pass (then none of the group is marked). */
VS_API vs_result vs_ddp_group_ready(vs_ddp* d, int group);
/* ZeRO-3 (vs_ddp_desc.zero = VS_ZERO_3): parameters, f32 masters, optimizer
   state and reduced gradients exist at rest only as this rank's 1/DP range of
   each bucket (+ padding). The unit of gathering is a ready group
   (vs_ddp_param_desc.ready_group: one bucket, or one per dtype). A step:
       forward, per group g:  vs_ddp_gather(d, g); use vs_ddp_param(d, i) of g's
                              parameters; vs_ddp_release(d, g)
       backward, reverse:     vs_ddp_gather(d, g) (no traffic when kept);
                              add into vs_ddp_grad(d, i); vs_ddp_group_ready(d, g);
                              vs_ddp_release(d, g)
       vs_ddp_finish_grad_sync, clip, vs_ddp_step as under ZeRO-1.
   - Registration: every parameter needs a nonzero ready_group (a group-0
     parameter is refused by vs_ddp_add_param, naming it: nothing would say
     when to gather it, and keeping it whole would break the memory bound);
     vs_ddp_param_desc.storage is refused (full-size buffers are what ZeRO-3
     keeps sharded); a trainer gives its own memory for a group's owned shard
     with vs_ddp_set_owned_storage instead (the gathered views stay DDP's).
   - vs_ddp_param of a parameter whose group is not gathered: NULL,
     VS_ERR_STATE naming the parameter and group. The views are valid until
     vs_ddp_release.
   - Gradients: vs_ddp_grad gives a full-size buffer from the staging pool
     (zero2_buffers of them, as ZeRO-2, at least twice the buckets of the
     largest group); vs_ddp_group_ready reduce-scatters it
     into the owned f32 accumulator, and the buffer returns to the pool once
     that completes. By default every backward reduces: accumulation adds up
     in the owned ranges.
   - vs_ddp_set_sync(d, 0): each bucket's full gradients stay in its buffer
     until a backward with sync on reduces them once. Memory: in that call
     the pool grows to a buffer a bucket (the whole model's gradients in the
     gradient dtype) and stays; vs_ddp_zero_grad drops what is left.
   - reshard_after_forward 1 (default): release frees the gathered buffer. 0
     (vs_ddp_desc, or per group vs_ddp_set_group_reshard): a release before the
     group's gradients are all marked ready in this pass (vs_ddp_group_ready,
     or vs_ddp_grad_ready of each) keeps it, and the next gather takes it
     without traffic; the marking (or the release after it) frees it.
   - From the second step, a release whose group is the next gather in the
     recorded order keeps its buffer for that gather (no traffic, no more
     memory): the forward's last group is not released before its backward,
     as FSDP2 keeps its root module; a gather of another group drops it.
     Kept so (as under reshard_after_forward 0) it stays readable:
     VESCALE_DEBUG=params guards it once freed.
   - A gather of a group held already (a recomputed forward) does nothing;
     one release gives it back. Held groups are released in any order.
   - Prefetch: the first step (up to its vs_ddp_step) records the order of
     gathers; later, vs_ddp_gather of the recorded next group issues the
     gathers of the `prefetch` groups after it (asynchronous: the host does
     not wait for them), and vs_ddp_step issues the first ones. A gather off
     the recorded order (a training forward after an evaluation's) finds its
     place again: the order's first group starts it over, another group its
     next place ahead, else its first.
   - Memory: at peak the owned ranges plus the groups gathered at once
     (held, kept, prefetched) plus the staging pool (two groups' gradients by
     default: one reduces while the next is written) plus the f32 scratch (a
     shard of the largest group) and DDP's tables; vs_ddp_memory_usage gives
     each part, and they are all DDP allocates.
   - The gathered pool: vs_ddp_finalize makes a buffer for each bucket of a
     kept group (reshard_after_forward 0) and for 1 + prefetch groups. The
     first step records the buckets held at each gather, and its vs_ddp_step
     grows the pool to the most a later step holds (those plus the
     prefetched), so no later step allocates. A trainer that holds more later
     grows it at that gather (a device DDP waits for its work in flight
     first: cudaMalloc synchronizes the device).
   - vs_ddp_step with a group still gathered (not released) is VS_ERR_STATE
     naming it: the step changes the shards it was gathered from.
   - vs_ddp_wait_params and vs_ddp_synchronize complete prefetched gathers
     too; vs_ddp_zero_grad waits for none.
   - VESCALE_DEBUG=params on the host: a released group's buffer is
     inaccessible until taken again, so a read or write through a view kept
     past its release faults, naming the group and one of its parameters.
   - On a device the release fills it with a NaN per parameter: a read gets
     NaN, which the non-finite gradient norm names where it arrives unchanged;
     a write is found when the pool hands the buffer out again, and the next
     gradient norm refuses the step on every rank (VS_ERR_STATE), naming it.
   - prefetch and reshard_after_forward must match over the ranks (finalize
     compares them), and so must the order of gathers and per-group settings:
     they decide which collectives run.
   Other stages: gather and release check the group and do nothing. Both
   after vs_ddp_finalize; a group no parameter declares (or 0) is
   VS_ERR_INVALID; release of a group not gathered (released twice, or never
   gathered) VS_ERR_STATE; nothing changes on an error. */
VS_API vs_result vs_ddp_gather(vs_ddp* d, int group);
VS_API vs_result vs_ddp_release(vs_ddp* d, int group);
/* reshard_after_forward (0 or 1) for one group, overriding the desc's; after
   its parameters are registered, any time but while it is gathered. */
VS_API vs_result vs_ddp_set_group_reshard(vs_ddp* d, int group, int reshard_after_forward);
/* ZeRO-3, trainer-owned owned shards: the trainer's memory holds ready group
   `group`'s owned parameter shard (what the gathers read and the step
   writes), instead of DDP's. vs_ddp_owned_bytes gives its size (*bytes): the
   group's buckets in bucket order, each its owned range in the parameters'
   dtype (vs_ddp_param_owned of a parameter points into it) at an offset
   rounded up to 16 bytes. vs_ddp_set_owned_storage copies the current values
   in and frees DDP's buffer (the group's shard exists twice only during the
   call; from registration to finalize DDP's copy is the only one).
   - after vs_ddp_finalize, between steps: not during a backward pass, the
     group not gathered or kept (VS_ERR_STATE); a prefetched gather of it is
     completed and dropped (the next gather issues it again);
   - storage: 16-byte aligned, vs_ddp_owned_bytes long, device memory on
     NCCL; the trainer keeps it until vs_ddp_free and frees it; a second call
     moves the group into another buffer;
   - vs_ddp_memory_usage's params counts only DDP's buffers;
   - ZeRO-3 only (else VS_ERR_UNSUPPORTED): the other stages take
     vs_ddp_param_desc.storage. */
VS_API vs_result vs_ddp_owned_bytes(const vs_ddp* d, int group, size_t* bytes);
VS_API vs_result vs_ddp_set_owned_storage(vs_ddp* d, int group, void* storage);
/* The value of exactly the owned range of parameter `index`, in its dtype,
   under every stage (ZeRO-3 keeps nothing else at rest): out->begin and
   out->end are vs_ddp_param_info's owned range, out->data its first element.
   To read, or to write between steps (restoring a checkpoint: write the
   master too, vs_ddp_optim_state). ZeRO-3: vs_ddp_step starts the gathers of
   the first groups of the next step: around writes between steps call
   vs_ddp_owned_rewrite. Device buffers: a device pointer. */
VS_API vs_result vs_ddp_param_owned(vs_ddp* d, int index, vs_ddp_span* out);
/* ZeRO-3, around writes into the owned ranges outside a step (a checkpoint's
   load: vs_ckpt_load_ddp calls it). drop 1, before: waits for the gathers
   made from the old values (vs_ddp_step's prefetch, a kept group) and gives
   their buffers back; a group still gathered (not released: the trainer
   holds views of the old values) is VS_ERR_STATE naming it, nothing changed.
   drop 0, after: issues the prefetch again. Other stages: nothing to do. */
VS_API vs_result vs_ddp_owned_rewrite(vs_ddp* d, int drop);
/* Writes parameter `index`'s value from `data`, its whole local shard in its
   dtype (host or device memory, as vs_ddp_param_desc.data), into what this
   rank keeps of it, and the owned range's f32 master:
   - ZeRO-3: the owned range (the rest of `data` is not read); the others:
     the local shard;
   - after vs_ddp_finalize, between steps; ZeRO-3: its group not gathered or
     kept (VS_ERR_STATE; a prefetched copy is dropped);
   - returns once `data` may be freed.
   Registration at 1/DP under ZeRO-3: register with data NULL (nothing kept),
   finalize, then write each parameter here. (vs_ddp_add_param copies a given
   `data` whole: a parameter's owned range is only known at finalize, as it
   depends on the parameters of its group registered after it.) */
VS_API vs_result vs_ddp_write_param(vs_ddp* d, int index, const void* data);
/* Reduces what is left and waits for every bucket; ends the backward pass.
   Called again with nothing new since (no vs_ddp_grad / vs_ddp_grad_ready): the
   gradients are reduced already, VS_ERR_STATE. */
VS_API vs_result vs_ddp_finish_grad_sync(vs_ddp* d);
typedef struct vs_clip_desc {
    double max_norm;        // > 0: clip to it; <= 0: only measure (*norm); NaN, inf: VS_ERR_INVALID
    int error_if_nonfinite; // see vs_ddp_clip_grad_norm_ex
    /* Mixed-precision loss scaling: the gradients hold `unscale` times their
       value (the loss's gradient was seeded scaled). The norm is divided by it
       and the gradients are unscaled in the clip's one pass (a finite norm:
       scaled by min(1, max_norm / norm) / unscale). 0 or 1: none; else finite
       and > 0 (VS_ERR_INVALID). */
    double unscale;
    /* Values that travel with the norm (e.g. a step's loss): carry[0..ncarry)
       are summed over the whole mesh in the norm's one all-reduce and written to
       carry_out[0..ncarry) (host memory) in the same read, so a step that wants
       its loss and its norm moves one copy to the host, not two.
       - ncarry: 0 to VS_CLIP_CARRY_MAX (else VS_ERR_INVALID); it may differ
         between ranks (each reads what it asks for).
       - carry_out: required when ncarry > 0.
       - carry: may be NULL (this rank adds zeros). On a device DDP it is device
         memory written on the DDP's stream (vs_ddp_desc.stream) before the
         call; on the host, host memory. */
    const double* carry;
    int ncarry;
    double* carry_out;
} vs_clip_desc;
#define VS_CLIP_CARRY_MAX 4
/* Global L2 norm of the gradients over DP x TP x PP (each element once), into
   *norm (may be NULL); scales them by max_norm / norm when norm > max_norm.
   Collective over the mesh. A NaN or infinite max_norm is VS_ERR_INVALID.

   One pass over this rank's gradients and one all-reduce of one double: the
   elements it does not count (copies of a gradient replicated over TP, a tied
   parameter's second copy) are read too, and a NaN or inf in one of them makes
   the norm NaN on every rank without changing a finite norm's bits.

   A non-finite norm (a NaN or inf gradient on any rank) scales nothing, and:
   - the next vs_ddp_step is skipped on every rank: it returns VS_OK without
     touching parameters, optimizer state or the step count, and
     vs_ddp_skipped_steps counts it (a new backward pass or vs_ddp_zero_grad
     cancels the skip);
   - with error_if_nonfinite (as torch.nn.utils.clip_grad_norm_) the call also
     fails with VS_ERR_NONFINITE naming the norm; gradients and parameters are
     left untouched.

   Device buffers: the host reads the norm (one host wait, which covers what was
   enqueued on desc.stream before the call). ZeRO-3 under VESCALE_DEBUG=params:
   VS_ERR_STATE on every rank after a write into a released buffer (the next
   step skipped; vs_ddp_gather). A trainer's loss rides along in
   vs_clip_desc.carry: one all-reduce, one copy and one host wait for the step's
   norm and loss together. */
VS_API vs_result vs_ddp_clip_grad_norm_ex(vs_ddp* d, const vs_clip_desc* clip, double* norm);
/* vs_ddp_clip_grad_norm_ex without error_if_nonfinite. */
VS_API vs_result vs_ddp_clip_grad_norm(vs_ddp* d, double max_norm, double* norm);
/* The global gradient norm the last clip measured (vs_ddp_clip_grad_norm, or
   vs_ddp_step with vs_ddp_desc.max_grad_norm), before it clipped: what its
   *norm was, NaN or inf included. -1 before the first clip, and for d NULL
   (with VS_ERR_NULL's message). */
VS_API double vs_ddp_grad_norm(const vs_ddp* d);
/* Optimizer step with learning rate `lr` (finite, >= 0: else VS_ERR_INVALID) on
   the owned ranges, then (ZeRO) the all-gather of the updated parameters.
   Collective over DP. The built-in optimizers leave a group whose lr is 0 (lr 0,
   or lr_scale 0) as it is: parameters and optimizer state; a custom step is
   called with lr 0. Needs gradients from vs_ddp_finish_grad_sync since the last
   step (else VS_ERR_STATE), or ends the open backward pass itself
   (vs_ddp_desc.finish_in_step) and clips (max_grad_norm) after checking lr.
   Skipped after a non-finite clip norm (see above). */
VS_API vs_result vs_ddp_step(vs_ddp* d, double lr);
/* Steps taken (skipped ones not counted), and steps skipped for a non-finite
   gradient norm. */
VS_API int64_t vs_ddp_step_count(const vs_ddp* d);
VS_API int64_t vs_ddp_skipped_steps(const vs_ddp* d);
/* Sets the step count (restoring a checkpoint: AdamW's bias correction uses it).
   Between steps; n >= 0. */
VS_API vs_result vs_ddp_set_step_count(vs_ddp* d, int64_t n);
VS_API vs_result vs_ddp_memory_usage(const vs_ddp* d, vs_ddp_memory* out);
/* The desc as the DDP uses it, every zero-is-default value resolved (as sokol's
   sg_query_desc): bucket_bytes (also after vs_ddp_set_bucket_bytes),
   zero2_buffers, optim.beta1/beta2/eps with their _set flags 1, optim.ngroups
   at least 1, each group's lr_scale with lr_scale_set 1, finish_in_step 1 when
   max_grad_norm > 0, and dp_dim / pp_dim
   naming the mesh's dims (strings owned by the mesh; pp_dim NULL when there is no
   pipeline dim). stream stays as given (NULL is the default stream). Passing the
   result to vs_ddp_init gives the same DDP settings. Any time after vs_ddp_init. */
VS_API vs_result vs_ddp_query_desc(const vs_ddp* d, vs_ddp_desc* out);
/* Parameter `index`'s layout, dtypes and owned range (see vs_ddp_param_info).
   After vs_ddp_add_param; the bucket and owned fields are -1 until
   vs_ddp_finalize. VS_ERR_NULL, or VS_ERR_INVALID for an index out of range. */
VS_API vs_result vs_ddp_query_param_info(const vs_ddp* d, int index, vs_ddp_param_info* out);
/* Optimizer state `which` of the owned range of parameter `index`: out->data
   points at the f32 state of flat element out->begin, out->end as owned_end
   (vs_ddp_param_info); the state of element i is data[i - begin]. After
   vs_ddp_finalize.
   - Save: map the range to global indices with vs_ddp_param_info (its global
     form).
   - Restore: write through data, between steps (vs_ddp_step reads and writes
     it). A restored master is not copied into the parameter: restore that too,
     with vs_ddp_param.
   - Which states exist: MASTER for bf16/f16 parameters, EXP_AVG and EXP_AVG_SQ
     with AdamW, MOMENTUM with SGD and momentum > 0, CUSTOM0 and CUSTOM1 with
     VS_OPTIM_CUSTOM; asking for another is VS_ERR_INVALID naming it and the
     reason.
   - Device buffers: a device pointer, as vs_ddp_grad_synced_owned. */
VS_API vs_result vs_ddp_optim_state(vs_ddp* d, int index, vs_ddp_state which, vs_ddp_span* out);
/* 1 when vs_ddp_optim_state(d, index, which) has a state to give, 0 when the
   optimizer keeps none such (no error is set: a quiet probe, e.g. for a
   checkpoint of every state there is); a negative vs_result for a bad handle,
   index or state. After vs_ddp_finalize. */
VS_API int vs_ddp_has_optim_state(const vs_ddp* d, int index, vs_ddp_state which);
/* Waits for the DDP's collectives still in flight (a ZeRO all-gather after a
   step, reductions of an unfinished backward pass), then frees it and releases
   the mesh. Free the DDP, then the mesh: vs_mesh_free refuses while a DDP on it
   (or on one of its submeshes) is alive. Freeing the same DDP twice is undefined
   (it cannot be detected). NULL: VS_OK. ZeRO-3 groups still gathered are freed
   with it (their views die with it). The DDP of a training state
   (vs_train_ddp in vescale.h) is the training state's: VS_ERR_STATE, and it
   keeps working; vs_train_free frees it. */
VS_API vs_result vs_ddp_free(vs_ddp* d);

#ifdef __cplusplus
}
#endif
#endif // VESCALE_DDP_INCLUDED

/* ========================================================================== */
#if defined(VESCALE_DDP_IMPLEMENTATION) && !defined(VESCALE_DDP_IMPLEMENTED)
#define VESCALE_DDP_IMPLEMENTED

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Device buffers come with the NCCL transport: the optimizer and the gradient
   arithmetic then run as kernels compiled at run time by NVRTC (link -lnvrtc).
   VESCALE_NVRTC alone builds only the compiler half (tests, offline checks). */
#if defined(VESCALE_NCCL) && !defined(_VS_DDP_CUDA)
#define _VS_DDP_CUDA 1
#endif
#if (defined(_VS_DDP_CUDA) || defined(VESCALE_NVRTC)) && !defined(_VS_DDP_NVRTC)
#define _VS_DDP_NVRTC 1
#endif
#ifdef _VS_DDP_CUDA
#include <cuda_runtime.h>
#endif
/* Tests only (tests/test_ddp_device.c): the device path over a host transport,
   with a stand-in CUDA runtime. */
#ifndef _VS_DDP_FORCE_DEVICE
#define _VS_DDP_FORCE_DEVICE 0
#endif
#ifdef _VS_DDP_NVRTC
#include <nvrtc.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define _VS_DDP_UNUSED __attribute__((unused))
#else
#define _VS_DDP_UNUSED
#endif
#define _VS_DDP_PRIVATE static _VS_DDP_UNUSED

// >>version --------------------------------------------------------------------

VS_API int vs_ddp_version(void) { return VESCALE_VERSION_NUMBER; }

// >>lr -------------------------------------------------------------------------

_VS_DDP_PRIVATE int _vs_ddp_finite(double x) { return isfinite(x) != 0; }

/* vs_lr_check with the caller's name in the message. */
_VS_DDP_PRIVATE vs_result _vs_lr_check(const char* fn, const vs_lr_schedule* s)
{
    if (!s) return vs_set_error(VS_ERR_NULL, "%s: schedule is NULL", fn);
    if ((int)s->kind < VS_LR_CONSTANT || (int)s->kind > VS_LR_STEP)
        return vs_set_error(VS_ERR_INVALID, "%s: unknown schedule kind %d (VS_LR_CONSTANT..VS_LR_STEP)", fn, (int)s->kind);
    if (!_vs_ddp_finite(s->lr) || s->lr < 0)
        return vs_set_error(VS_ERR_INVALID, "%s: lr %g must be finite and >= 0", fn, s->lr);
    if (!_vs_ddp_finite(s->min_lr) || s->min_lr < 0)
        return vs_set_error(VS_ERR_INVALID, "%s: min_lr %g must be finite and >= 0", fn, s->min_lr);
    if (s->warmup_steps < 0)
        return vs_set_error(VS_ERR_INVALID, "%s: warmup_steps %lld < 0", fn, (long long)s->warmup_steps);
    if (s->total_steps < 0)
        return vs_set_error(VS_ERR_INVALID, "%s: total_steps %lld < 0", fn, (long long)s->total_steps);
    if (s->step_size < 0) return vs_set_error(VS_ERR_INVALID, "%s: step_size %lld < 0", fn, (long long)s->step_size);
    if ((s->kind == VS_LR_COSINE || s->kind == VS_LR_LINEAR) && (s->total_steps <= 0 || s->total_steps < s->warmup_steps))
        return vs_set_error(VS_ERR_INVALID, "%s: %s schedule: total_steps %lld must be > 0 and >= warmup_steps %lld", fn,
                            s->kind == VS_LR_COSINE ? "cosine" : "linear", (long long)s->total_steps,
                            (long long)s->warmup_steps);
    if (s->kind == VS_LR_STEP && (!_vs_ddp_finite(s->gamma) || s->gamma < 0))
        return vs_set_error(VS_ERR_INVALID, "%s: step schedule: gamma %g must be finite and >= 0", fn, s->gamma);
    return VS_OK;
}

VS_API vs_result vs_lr_check(const vs_lr_schedule* s) { return _vs_lr_check("vs_lr_check", s); }

VS_API double vs_lr_at(const vs_lr_schedule* s, int64_t step)
{
    if (_vs_lr_check("vs_lr_at", s)) return NAN;
    if (step < 0) {
        vs_set_error(VS_ERR_INVALID, "vs_lr_at: step %lld < 0", (long long)step);
        return NAN;
    }
    // every count is >= 0 now, so no difference below can overflow
    if (step < s->warmup_steps) return s->lr * ((double)step + 1.0) / (double)s->warmup_steps;
    int64_t t = step - s->warmup_steps;
    int64_t span = s->total_steps - s->warmup_steps;
    double frac = span > 0 ? (double)t / (double)span : 1.0;
    if (frac > 1.0) frac = 1.0;
    switch (s->kind) {
    case VS_LR_COSINE: return s->min_lr + 0.5 * (s->lr - s->min_lr) * (1.0 + cos(3.14159265358979323846 * frac));
    case VS_LR_LINEAR: return s->lr + (s->min_lr - s->lr) * frac;
    case VS_LR_STEP: return s->step_size > 0 ? s->lr * pow(s->gamma, (double)(t / s->step_size)) : s->lr;
    case VS_LR_CONSTANT: return s->lr;
    }
    return NAN; // not reached: _vs_lr_check knows the kinds
}

// >>ddp-state ------------------------------------------------------------------

typedef struct _vs_dcuda _vs_dcuda; // the device path (>>cuda)

typedef struct _vs_dparam {
    char* name;
    vs_dtype dtype, gdtype;
    int ndim;
    int64_t shape[VS_TENSOR_MAX_DIMS];
    vs_placement pl[VS_MESH_MAX_DIMS];
    int group, no_decay, tied_copy;
    int64_t lshape[VS_TENSOR_MAX_DIMS], loff[VS_TENSOR_MAX_DIMS]; // local shard: shape, global offset
    int64_t numel;    // local shard
    int bucket;
    int64_t offset;   // element offset in the bucket
    int ready;
    int counted;      // counted by the grad norm on this rank (see _vs_ddp_counted)
    void* init;       // copy of the initial data until finalize
    void* pext;       // trainer-owned storage (vs_ddp_param_desc.storage), or NULL
    void* gext;       // and its gradient
    int rgroup;       // vs_ddp_param_desc.ready_group
    int poisoned;     // VESCALE_DEBUG=params: part of its stale range holds NaN until the gather lands
    int reshard;      // ZeRO-3: vs_ddp_set_group_reshard's value, -1: the desc's
} _vs_dparam;

typedef struct _vs_dbucket {
    vs_dtype pdtype, gdtype;
    unsigned partial_mask; // mesh dims over which the gradients are partial (besides DP)
    int first, last;       // parameter indices in bucket order: params[order[first..last)]
    int64_t numel;         // padded to a multiple of dp
    int64_t shard;         // numel / dp
    void* param;           // numel, param dtype
    void* grad;            // numel (ZeRO-0/1), or the staging buffer in use (ZeRO-2)
    float* grad_shard;     // acc: the reduced owned range, f32, summed over synced passes
    float* master;         // f32 master weights of the owned range (half params)
    float* state[2];       // optimizer state of the owned range (f32)
    int acc;               // has grad_shard, to add up reduced gradients over several passes
    int acc_used;          // grad_shard holds them (ZeRO-2 always; others from a second pass)
    int nready, launched, staged, done;
    vs_work* work;
    vs_work* pwork; // ZeRO: the all-gather of updated parameters, in flight
    int ext;        // its parameters are trainer-owned (param and grad NULL but while staged)
    int rgroup;     // their ready_group
    int consume;    // ext with an accumulator: the reduced range goes there, the trainer's gradient is cleared
    int fresh;      // consume (or ZeRO-2/3 after zero_grad): the accumulator holds nothing of this step yet: written, not added to
    int into_acc;   // this pass reduced straight into the accumulator (fresh f32: no copy after)
    int grouped;    // ext, not partial, ZeRO-0/1: reduced in place, one group (vs_ddp_desc.staged 0)
    void* gbuf;     // a pool buffer holding the all-gather in flight (staged, or VESCALE_DEBUG=params)
    int guarded;    // VESCALE_DEBUG=params: its parameters' stale pages are guarded until the unpack
    int gclean;     // ext: DDP zeroed the trainer's gradients and no backward pass began since
    int across;     // HSDP: the owned range was averaged over the replicate group in this pass
    /* ZeRO-3: param holds only the owned range, bucket elements [pbase, pbase + shard) */
    int64_t pbase;  // 0 under the other stages
    void* zbuf;     // the gathered bucket (a buffer of the gathered pool), or NULL
    int zstate;     // _VS_Z3_REST, _VS_Z3_FLIGHT (prefetched: pwork, or complete), _VS_Z3_HELD, _VS_Z3_KEPT
    int reshard;    // reshard_after_forward of its group
    int zbwd;       // its group_ready came in this backward pass: a release frees
    int zroot;      // KEPT for the next recorded gather, its own (_vs_ddp_z3_keeps); meaningful only when KEPT
    int pown;       // param is the trainer's (vs_ddp_set_owned_storage): not freed, not counted
    int zrest;      // the gathers recorded when it last went back to rest (the first step's pool sizing)
} _vs_dbucket;
enum { _VS_Z3_REST = 0, _VS_Z3_FLIGHT, _VS_Z3_HELD, _VS_Z3_KEPT };

struct vs_ddp {
    vs_ddp_desc desc;
    vs_mesh* mesh;
    vs_mesh* dp;
    int dp_size, dp_rank, dp_index, pp_index;
    int dpr_index;       // HSDP: the replicate dim (-1: none); dp_index is then the shard dim
    vs_mesh* dpr;        // HSDP: the replicate group (after finalize)
    vs_mesh* dp_both;    // HSDP: replicate x shard, ZeRO-0's all-reduce
    int solo;            // one DP rank and one replica: the reduction and ZeRO's gathers are the identity, no call
                         // (_vs_ddp_launch, vs_ddp_step)
    int nparams, cap;
    _vs_dparam* params;
    vs_world* world; // allocator hooks
    const char* owner; // set: another handle's (a training state's), which frees it; vs_ddp_free refuses
    int own_mesh;      // the mesh was made for vs_ddp_desc.world: vs_ddp_free frees it
    int* order; // bucket order (reverse registration)
    int nbuckets;
    _vs_dbucket* buckets;
    int next_launch; // buckets launch in order
    int next_done;   // launched buckets before it need no completion from _vs_ddp_launch_ready
    int sync, in_pass, finalized, grads_pending;
    int synced;      // the gradients hold a synchronized pass's reduced values (vs_ddp_grad_synced_owned)
    int skip_next;   // the clip norm was not finite: the next step is skipped
    int clipped;      // clipped since the gradients were synchronized (vs_ddp_step's own clip: not again)
    double grad_norm; // the last clip's norm (vs_ddp_grad_norm), -1 before one
    int64_t steps, skipped;
    void** pool; // staging buffers: ZeRO-2 gradients, trainer-owned buckets, staged all-gathers
    int* pool_owner; // -1 free; b: bucket b's gradients; -2 - b: bucket b's all-gather
    int npool;
    size_t pool_bytes;
    int debug_params; // VESCALE_DEBUG=params (vs_ddp_wait_params)
    int log_debug;    // the world logs at debug: each bucket's launch is logged
    int warned_order; // the out-of-order readiness warning was given (once a DDP)
    const char* stale_read; // VESCALE_DEBUG=params: a poisoned parameter still gathered as a backward began
    int nstale;             // how many such
    int64_t max_bucket;
    size_t max_grad_bytes; // largest bucket's gradient buffer (ZeRO-2 staging size)
    float* scratch; // f32 conversion space, max bucket shard
    int dev;         // buffers on the CUDA device (NCCL transport)
    _vs_dcuda* cu;   // its kernels and stream (after finalize)
    /* ZeRO-3: the gathered pool (buffers of zpool_bytes, zpool_owner: a bucket or
       -1) and the gather order the first step recorded (zorder: groups) */
    void** zpool;
    int* zpool_owner;
    int nzpool;
    size_t zpool_bytes;
    int* zheld; // the first step: the buckets a later step holds at each recorded gather (_vs_ddp_zpool_note)
    int capzheld;
    int* zorder;
    int nzorder, capzorder, zrecorded, zpos;
};

_VS_DDP_PRIVATE size_t _vs_dsz(vs_dtype t) { return vs_dtype_size(t); }

/* "[2, 3]" into buf. */
_VS_DDP_PRIVATE const char* _vs_ddp_shape_str(char* buf, size_t cap, int ndim, const int64_t* shape)
{
    size_t n = 0;
    buf[0] = 0;
    for (int k = 0; k < ndim && n + 1 < cap; k++) {
        int w = snprintf(buf + n, cap - n, "%s%lld", k ? ", " : "[", (long long)shape[k]);
        if (w < 0) break;
        n += (size_t)w;
    }
    if (n + 1 < cap) snprintf(buf + n, cap - n, "%s", ndim > 0 ? "]" : "[]");
    return buf;
}

// >>kernels --------------------------------------------------------------------

/* The optimizer's elementwise kernels, written once in vescale_mesh.h's kernel
   vocabulary (>>kernels there):
   - host: this text compiled as C, each kernel a plain loop;
   - CUDA: the very same text, as a string, to vs_kernels_get, which
     NVRTC-compiles it once per process and architecture after the shared
     prelude: a trainer built by gcc gets device kernels without nvcc, and every
     test of the host path checks the device arithmetic too (NVRTC runs with
     --fmad=false and IEEE division and square root, so both give the same
     bits).

   The element loads and stores, and the f16/bf16 conversions, are the shared
   text's (VS_MK_DTYPES; dtype codes 0 f32, 1 bf16, 2 f16), the sum of squares'
   tree its VS_MKFOLD. Block comments only in here: the text becomes one
   line. */
#define _VS_KN(x) VS_MKSEL(_vs_hk_##x, vs_k_##x)
#define _VS_DDP_KERNELS \
    VS_MKGLOBAL _VS_KN(adamw)(float* p, const float* g, float* m1, float* m2, long long n, float b1, float b2, \
                               float omb1, float omb2, float step, float c2, float eps, float decay) \
    { \
        VS_MKLOOP(x, n) { \
            m1[x] = b1 * m1[x] + omb1 * g[x]; \
            m2[x] = b2 * m2[x] + omb2 * g[x] * g[x]; \
            p[x] = p[x] * decay - step * m1[x] / (sqrtf(m2[x]) * c2 + eps); \
        } \
    } \
    VS_MKGLOBAL _VS_KN(sgd)(float* p, const float* g, float* m1, long long n, float mu, float lr, float wd, \
                             int nesterov) \
    { \
        VS_MKLOOP(x, n) { \
            float gx = g[x] + wd * p[x]; \
            if (m1) { \
                m1[x] = mu * m1[x] + gx; \
                gx = nesterov ? gx + mu * m1[x] : m1[x]; \
            } \
            p[x] -= lr * gx; \
        } \
    } \
    VS_MKGLOBAL _VS_KN(to_f32)(float* dst, const void* src, int t, long long n) \
    { \
        VS_MKLOOP(x, n) dst[x] = VS_MKN(ld)(src, t, x); \
    } \
    VS_MKGLOBAL _VS_KN(from_f32)(void* dst, int t, const float* src, long long n) \
    { \
        VS_MKLOOP(x, n) VS_MKN(st)(dst, t, x, src[x]); \
    } \
    VS_MKGLOBAL _VS_KN(add_f32)(float* acc, const void* src, int t, long long n) \
    { \
        VS_MKLOOP(x, n) acc[x] += VS_MKN(ld)(src, t, x); \
    } \
    VS_MKGLOBAL _VS_KN(scale)(void* a, int t, long long n, float s) \
    { \
        VS_MKLOOP(x, n) VS_MKN(st)(a, t, x, VS_MKN(ld)(a, t, x) * s); \
    } \
    /* the sum of squares in _VS_KPARTS fixed parts (the same bits on any grid): \
       part b's threads take strided partials in double, then a tree, added into \
       part[b]; the host path sums in order instead (_vs_ddp_sumsq) */ \
    VS_MKGLOBAL _VS_KN(sumsq)(const float* g, long long n, double* part) \
    { \
        VS_MKSHARED double s[VS_MKT]; \
        VS_MKROWS(b, _VS_KPARTS) { \
            VS_MKTHREADS(t) { \
                double v = 0; \
                long long i; \
                for (i = b * VS_MKT + t; i < n; i += (long long)_VS_KPARTS * VS_MKT) v += (double)g[i] * (double)g[i]; \
                s[t] = v; \
            } \
            VS_MKSYNC; \
            VS_MKFOLD(s, VS_MKT, VS_MKT, VS_MK_ADD) \
            VS_MKTHREADS(t) if (t == 0) part[b] += s[0]; \
            VS_MKSYNC; \
        } \
    } \
    /* VESCALE_DEBUG=params, ZeRO-3 on a device: a released buffer's canary, n \
       halfwords alternately lo and hi (an f32 NaN word, or a 16-bit NaN twice); \
       the check records code in rec[0] where a halfword differs (if none is there) */ \
    VS_MKGLOBAL _VS_KN(canary)(unsigned short* p, long long n, int lo, int hi) \
    { \
        VS_MKLOOP(x, n) p[x] = (unsigned short)((x & 1) ? hi : lo); \
    } \
    VS_MKGLOBAL _VS_KN(canary_check)(const unsigned short* p, long long n, int lo, int hi, \
                                      double* rec, double code) \
    { \
        VS_MKLOOP(x, n) if (p[x] != (unsigned short)((x & 1) ? hi : lo) && rec[0] == 0.0) rec[0] = code; \
    }

/* Blocks of the device sum of squares: a fixed number, each adding into its own
   slot launch after launch, so the norm is the same bits every run. */
#define _VS_KPARTS 64
/* the partial sums buffer: the counted elements' parts, the copies', then the
   values carried with the norm (vs_clip_desc.carry), then VESCALE_DEBUG=params'
   record of a write into a released ZeRO-3 buffer (summed over the ranks: all
   see one) */
#define _VS_KPART_DBG (2 * _VS_KPARTS + VS_CLIP_CARRY_MAX)
#define _VS_KPART_ALL (_VS_KPART_DBG + 1)
#define _VS_KTHREADS 256 /* a block's threads: the vocabulary's (sumsq's tree assumes it) */
typedef char _vs_kthreads_check[_VS_KTHREADS == VS_MKT ? 1 : -1];

/* Kernel indices. */
enum { _VS_KI_ADAMW, _VS_KI_SGD, _VS_KI_TO_F32, _VS_KI_FROM_F32, _VS_KI_ADD_F32, _VS_KI_SCALE, _VS_KI_SUMSQ,
       _VS_KI_CANARY, _VS_KI_CANARY_CHECK, _VS_KI_N };

/* The kernels above as host C: the shared part once per file (vescale_mesh.h's
   implementation builds it when it is in this file), then the kernels. */
#define VS_MK_DEVICE 0
#ifndef VS_MK_HOST_SHARED
#define VS_MK_HOST_SHARED
VS_MK_HOSTBITS
VS_MK_DTYPES
#endif
_VS_DDP_KERNELS
#undef VS_MK_DEVICE

/* Each kernel's declaration (vescale_mesh.h's vs_kernel_decl): its arguments,
   and its cost from them, each operand's bytes once. */
_VS_DDP_PRIVATE void _vs_kc_adamw(void** a, vs_kernel_cost* c) /* p, g, m1, m2, n, ... */
{
    long long n = VS_MKARG(long long, 4);
    c->flops = 14.0 * (double)n;  // m1: 3, m2: 4, p: 7 (a sqrt and a division among them)
    c->bytes = 28.0 * (double)n;  // p, g, m1, m2 read; p, m1, m2 written
    c->len[0] = c->len[1] = c->len[2] = c->len[3] = n * 4;
}
_VS_DDP_PRIVATE void _vs_kc_sgd(void** a, vs_kernel_cost* c) /* p, g, m1 (may be NULL), n, mu, lr, wd, nesterov */
{
    long long n = VS_MKARG(long long, 3);
    int mom = VS_MKARG(void*, 2) != NULL, nest = VS_MKARG(int, 7) != 0;
    c->flops = (double)n * (mom ? (nest ? 8 : 6) : 4);
    c->bytes = (double)n * (mom ? 20 : 12); // p, g (and m1) read; p (and m1) written
    c->len[0] = c->len[1] = c->len[2] = n * 4;
}
_VS_DDP_PRIVATE void _vs_kc_to_f32(void** a, vs_kernel_cost* c) /* dst, src, t, n */
{
    long long n = VS_MKARG(long long, 3);
    double e = VS_MKESZ(VS_MKARG(int, 2));
    c->bytes = (double)n * (4 + e);
    c->len[0] = n * 4, c->len[1] = (long long)((double)n * e);
}
_VS_DDP_PRIVATE void _vs_kc_from_f32(void** a, vs_kernel_cost* c) /* dst, t, src, n */
{
    long long n = VS_MKARG(long long, 3);
    double e = VS_MKESZ(VS_MKARG(int, 1));
    c->bytes = (double)n * (4 + e);
    c->len[0] = (long long)((double)n * e), c->len[2] = n * 4;
}
_VS_DDP_PRIVATE void _vs_kc_add_f32(void** a, vs_kernel_cost* c) /* acc, src, t, n */
{
    long long n = VS_MKARG(long long, 3);
    double e = VS_MKESZ(VS_MKARG(int, 2));
    c->flops = (double)n;
    c->bytes = (double)n * (8 + e);
    c->len[0] = n * 4, c->len[1] = (long long)((double)n * e);
}
_VS_DDP_PRIVATE void _vs_kc_scale(void** a, vs_kernel_cost* c) /* a, t, n, s */
{
    long long n = VS_MKARG(long long, 2);
    double e = VS_MKESZ(VS_MKARG(int, 1));
    c->flops = (double)n;
    c->bytes = 2.0 * (double)n * e;
    c->len[0] = (long long)((double)n * e);
}
_VS_DDP_PRIVATE void _vs_kc_sumsq(void** a, vs_kernel_cost* c) /* g, n, part: _VS_KPARTS slots */
{
    long long n = VS_MKARG(long long, 1);
    c->flops = 2.0 * (double)n;
    c->bytes = 4.0 * (double)n + 2.0 * _VS_KPARTS * sizeof(double);
    c->len[0] = n * 4, c->len[2] = _VS_KPARTS * (long long)sizeof(double);
}
_VS_DDP_PRIVATE void _vs_kc_canary(void** a, vs_kernel_cost* c) /* p, n halfwords, lo, hi */
{
    long long n = VS_MKARG(long long, 1);
    c->bytes = 2.0 * (double)n;
    c->len[0] = n * 2;
}
_VS_DDP_PRIVATE void _vs_kc_canary_check(void** a, vs_kernel_cost* c) /* p, n, lo, hi, rec, code */
{
    long long n = VS_MKARG(long long, 1);
    c->flops = (double)n; // a compare a halfword
    c->bytes = 2.0 * (double)n + sizeof(double);
    c->len[0] = n * 2, c->len[4] = (long long)sizeof(double);
}
static const vs_kernel_decl _vs_ddp_kdecls[_VS_KI_N] _VS_DDP_UNUSED = {
    {"vs_k_adamw", "wrwwlffffffff", "p g m1 m2 n b1 b2 omb1 omb2 step c2 eps decay", _vs_kc_adamw, 0},
    {"vs_k_sgd", "wrwlfffi", "p g m1 n mu lr wd nesterov", _vs_kc_sgd, 0},
    {"vs_k_to_f32", "wril", "dst src t n", _vs_kc_to_f32, 0},
    {"vs_k_from_f32", "wirl", "dst t src n", _vs_kc_from_f32, 0},
    {"vs_k_add_f32", "wril", "acc src t n", _vs_kc_add_f32, 0},
    {"vs_k_scale", "wilf", "a t n s", _vs_kc_scale, 0},
    {"vs_k_sumsq", "rlw", "g n part", _vs_kc_sumsq, 0},
    {"vs_k_canary", "wlii", "p n lo hi", _vs_kc_canary, 0},
    {"vs_k_canary_check", "rliiwd", "p n lo hi rec code", _vs_kc_canary_check, 0}};

/* Kernel ki's host build on a launch's arguments (the text's host function). */
_VS_DDP_PRIVATE void _vs_ddp_khost(int ki, void** a)
{
#define _VS_A(T, i) (*(T*)a[i])
    switch (ki) {
    case _VS_KI_ADAMW:
        _vs_hk_adamw(_VS_A(float*, 0), _VS_A(const float*, 1), _VS_A(float*, 2), _VS_A(float*, 3),
                     _VS_A(long long, 4), _VS_A(float, 5), _VS_A(float, 6), _VS_A(float, 7), _VS_A(float, 8),
                     _VS_A(float, 9), _VS_A(float, 10), _VS_A(float, 11), _VS_A(float, 12));
        break;
    case _VS_KI_SGD:
        _vs_hk_sgd(_VS_A(float*, 0), _VS_A(const float*, 1), _VS_A(float*, 2), _VS_A(long long, 3), _VS_A(float, 4),
                   _VS_A(float, 5), _VS_A(float, 6), _VS_A(int, 7));
        break;
    case _VS_KI_TO_F32: _vs_hk_to_f32(_VS_A(float*, 0), _VS_A(const void*, 1), _VS_A(int, 2), _VS_A(long long, 3)); break;
    case _VS_KI_FROM_F32:
        _vs_hk_from_f32(_VS_A(void*, 0), _VS_A(int, 1), _VS_A(const float*, 2), _VS_A(long long, 3));
        break;
    case _VS_KI_ADD_F32: _vs_hk_add_f32(_VS_A(float*, 0), _VS_A(const void*, 1), _VS_A(int, 2), _VS_A(long long, 3)); break;
    case _VS_KI_SCALE: _vs_hk_scale(_VS_A(void*, 0), _VS_A(int, 1), _VS_A(long long, 2), _VS_A(float, 3)); break;
    case _VS_KI_SUMSQ: _vs_hk_sumsq(_VS_A(const float*, 0), _VS_A(long long, 1), _VS_A(double*, 2)); break;
    case _VS_KI_CANARY:
        _vs_hk_canary(_VS_A(unsigned short*, 0), _VS_A(long long, 1), _VS_A(int, 2), _VS_A(int, 3));
        break;
    default:
        _vs_hk_canary_check(_VS_A(const unsigned short*, 0), _VS_A(long long, 1), _VS_A(int, 2),
                            _VS_A(int, 3), _VS_A(double*, 4), _VS_A(double, 5));
        break;
    }
#undef _VS_A
}

/* The kernels above as NVRTC source. */
#ifdef _VS_DDP_NVRTC /* (a C99 compiler need not take a string this long: only NVRTC builds have it) */
#define VS_MK_DEVICE 1
static const char _vs_ddp_body[] _VS_DDP_UNUSED = VS_MKSTR(_VS_DDP_KERNELS) "\n";
#undef VS_MK_DEVICE
static const vs_kernel_text _vs_ddp_text _VS_DDP_UNUSED = {"vescale_ddp_kernels.cu", _vs_ddp_body, _VS_KI_N,
                                                           _vs_ddp_kdecls, _vs_ddp_khost};
#endif

_VS_DDP_PRIVATE int _vs_kdt(vs_dtype t) { return t == VS_F32 ? 0 : t == VS_BF16 ? 1 : 2; }

/* Host bookkeeping goes through the world's allocator hooks too (as every
   allocation of the library): n zeroed T, NULL on overflow or out of memory. */
_VS_DDP_PRIVATE void* _vs_ddp_new(const vs_world* w, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) return NULL;
    void* p = vs_alloc(w, n * size);
    if (p && (n * size) != 0) memset(p, 0, n * size);
    return p;
}
#define _VS_DDP_NEW(w, T, n) ((T*)_vs_ddp_new((w), (size_t)(n), sizeof(T)))

// >>cuda -----------------------------------------------------------------------

#ifdef _VS_DDP_CUDA

struct _vs_dcuda {
    cudaStream_t stream; // the trainer's (vs_ddp_desc.stream)
    void* k[_VS_KI_N];   // the process's kernels (vs_kernels_get): cudaKernel_t
    cudaEvent_t ev; // orders the stream's work before a collective on a comm's stream
    double* part;   // _VS_KPART_ALL: partial sums of squares (device), the counted elements', the copies', the carry
    double* norm;   // the norm's all-reduce buffer (device)
    double* hpart;  // pinned host memory: part's read lands here, waited for with the deadline (vs_sync_stream)
    /* VESCALE_DEBUG=params, ZeRO-3: the canaries of released buffers (_vs_ddp_canary) */
    double* drec;   // device: this rank's record of a changed canary (_vs_ddp_canary's code), 0 none
    double wrote[2]; // the last norm's read: drec summed over the ranks, and this rank's
    void** cbuf;    // the gathered pool's buffers seen, and (cbucket) the bucket holding each (>= 0), or
    int* cbucket;   // -2 - the bucket whose canary it holds (given back by vs_ddp_release), or -1
    int ncbuf, capcbuf;
};

_VS_DDP_PRIVATE vs_result _vs_ddp_cuerr(cudaError_t e, const char* what) { return vs_cuda_error((int)e, "vs_ddp", what); }

_VS_DDP_PRIVATE void _vs_ddp_cuda_free(vs_ddp* d)
{
    _vs_dcuda* cu = d->cu;
    if (!cu) return;
    if (cu->part) vs_device_free(d->world, cu->part);
    if (cu->norm) vs_device_free(d->world, cu->norm);
    if (cu->hpart) cudaFreeHost(cu->hpart);
    if (cu->drec) vs_device_free(d->world, cu->drec);
    vs_free(d->world, cu->cbuf);
    vs_free(d->world, cu->cbucket);
    if (cu->ev) cudaEventDestroy(cu->ev);
    vs_free(d->world, cu);
    d->cu = NULL;
}

/* The kernels for this rank's device (compiled the first time in the process)
   and the DDP's device scratch. */
_VS_DDP_PRIVATE vs_result _vs_ddp_cuda_init(vs_ddp* d)
{
    _vs_dcuda* cu = _VS_DDP_NEW(d->world, _vs_dcuda, 1);
    if (!cu) return vs_set_error(VS_ERR_NOMEM, "vs_ddp: out of memory");
    d->cu = cu;
    cu->stream = (cudaStream_t)d->desc.stream;
    vs_result r = vs_kernels_get(&_vs_ddp_text, "vs_ddp", cu->k);
    if (r) return r;
    cudaError_t e = cudaEventCreateWithFlags(&cu->ev, cudaEventDisableTiming);
    if (e != cudaSuccess) return _vs_ddp_cuerr(e, "cudaEventCreate");
    cu->part = (double*)vs_device_alloc(d->world, sizeof(double) * _VS_KPART_ALL);
    cu->norm = (double*)vs_device_alloc(d->world, sizeof(double));
    if (!cu->part || !cu->norm) return vs_set_error(VS_ERR_NOMEM, "vs_ddp: out of device memory");
    e = cudaMallocHost((void**)&cu->hpart, sizeof(double) * (_VS_KPART_ALL + 1)); // (+ drec's read)
    if (e != cudaSuccess) return _vs_ddp_cuerr(e, "cudaMallocHost");
    if (d->debug_params && d->desc.zero == VS_ZERO_3) { // (zeroed on the trainer's stream before any use)
        cu->drec = (double*)vs_device_alloc(d->world, sizeof(double));
        if (!cu->drec) return vs_set_error(VS_ERR_NOMEM, "vs_ddp: out of device memory");
        if ((e = cudaMemsetAsync(cu->drec, 0, sizeof(double), cu->stream)) != cudaSuccess)
            return _vs_ddp_cuerr(e, "cudaMemsetAsync");
    }
    return VS_OK;
}

/* Runs kernel ki over n elements on the trainer's stream (d->cu is set). */
_VS_DDP_PRIVATE vs_result _vs_ddp_kernel(const vs_ddp* d, int ki, int64_t n, void** args)
{
    if (n <= 0) return VS_OK;
    int64_t blocks = ki == _VS_KI_SUMSQ ? _VS_KPARTS : (n + _VS_KTHREADS - 1) / _VS_KTHREADS;
    if (blocks > 8192) blocks = 8192; // grid-stride loops do the rest
    dim3 grid, block;
    grid.x = (unsigned)blocks, grid.y = grid.z = 1;
    block.x = _VS_KTHREADS, block.y = block.z = 1;
    cudaError_t e = cudaLaunchKernel((const void*)d->cu->k[ki], grid, block, args, 0, d->cu->stream);
    if (e == cudaSuccess) return VS_OK;
    char what[64];
    snprintf(what, sizeof what, "kernel launch of %s", _vs_ddp_kdecls[ki].name);
    return _vs_ddp_cuerr(e, what);
}

/* The trainer's stream so far happens before what is next enqueued on c's stream. */
_VS_DDP_PRIVATE vs_result _vs_ddp_fence(const vs_ddp* d, vs_comm* c)
{
    if (!d->cu) return VS_OK;
    cudaError_t e = cudaEventRecord(d->cu->ev, d->cu->stream);
    if (e == cudaSuccess) e = cudaStreamWaitEvent((cudaStream_t)vs_comm_stream(c), d->cu->ev, 0);
    return e == cudaSuccess ? VS_OK : _vs_ddp_cuerr(e, "ordering the stream before a collective");
}

/* The host waits for the trainer's stream: on NCCL with the DP communicator's
   deadline and fault watch (vs_sync_stream: a peer that never arrives ends in an
   error, not a hang, even though the stream waits on stream-ordered work). */
_VS_DDP_PRIVATE vs_result _vs_ddp_sync(const vs_ddp* d)
{
    if (!d->cu) return VS_OK;
    vs_comm* c = vs_mesh_comm(d->dp);
    if (vs_comm_device(c) == 1)
        return vs_sync_stream(c, d->cu->stream ? (void*)d->cu->stream : (void*)cudaStreamLegacy);
    // a host transport (the tests' forced device path): its collectives complete on the host, none holds the stream
    cudaError_t e = cudaStreamSynchronize(d->cu->stream);
    return e == cudaSuccess ? VS_OK : _vs_ddp_cuerr(e, "cudaStreamSynchronize");
}
#else
_VS_DDP_PRIVATE vs_result _vs_ddp_kernel(const vs_ddp* d, int ki, int64_t n, void** args)
{
    (void)d, (void)n, (void)args;
    return vs_set_error(VS_ERR_UNSUPPORTED, "vs_ddp: kernel %d needs the CUDA build (VESCALE_NCCL)", ki);
}
_VS_DDP_PRIVATE vs_result _vs_ddp_fence(const vs_ddp* d, vs_comm* c)
{
    (void)d, (void)c;
    return VS_OK;
}
_VS_DDP_PRIVATE vs_result _vs_ddp_sync(const vs_ddp* d)
{
    (void)d;
    return VS_OK;
}
#endif // _VS_DDP_CUDA

// >>agree ----------------------------------------------------------------------

/* What ranks must agree on about one parameter, laid out without padding so
   that its bytes can be hashed and gathered as they are. */
typedef struct _vs_dprint {
    int64_t present, dtype, ndim, group, no_decay, storage, ready_group;
    uint64_t name_hash;
    int64_t shape[VS_TENSOR_MAX_DIMS];
    int64_t pl[VS_MESH_MAX_DIMS][2]; // kind, then the shard dim or the partial op
    char name[96];                   // for messages (the hash covers the whole name)
} _vs_dprint;

_VS_DDP_PRIVATE uint64_t _vs_ddp_fnv(uint64_t h, const void* p, size_t n)
{
    const unsigned char* b = (const unsigned char*)p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
#define _VS_DDP_FNV0 0xcbf29ce484222325ull

_VS_DDP_PRIVATE void _vs_ddp_print(const vs_ddp* d, int i, _vs_dprint* f)
{
    memset(f, 0, sizeof *f);
    if (i >= d->nparams) return;
    const _vs_dparam* q = &d->params[i];
    f->present = 1;
    f->dtype = q->dtype;
    f->ndim = q->ndim;
    f->group = q->group;
    f->no_decay = q->no_decay != 0;
    f->storage = q->pext != NULL;
    f->ready_group = q->rgroup;
    f->name_hash = _vs_ddp_fnv(_VS_DDP_FNV0, q->name, strlen(q->name));
    for (int k = 0; k < q->ndim; k++) f->shape[k] = q->shape[k];
    for (int k = 0; k < vs_mesh_ndims(d->mesh); k++) {
        f->pl[k][0] = q->pl[k].kind;
        if (q->pl[k].kind == VS_PLACE_SHARD) f->pl[k][1] = q->pl[k].dim;
        if (q->pl[k].kind == VS_PLACE_PARTIAL) f->pl[k][1] = q->pl[k].op == VS_OP_DEFAULT ? VS_OP_SUM : q->pl[k].op;
    }
    snprintf(f->name, sizeof f->name, "%s", q->name);
}

/* The settings that shape the buckets and the collectives. */
typedef struct _vs_dsummary {
    int64_t nparams;
    uint64_t digest; // of every parameter's print, in order
    int64_t zero, bucket_bytes, grad_fp32, kind, staged;
    int64_t finish_in_step; // what vs_ddp_step does first: a clip there is a collective
    double max_grad_norm;
    int64_t prefetch, reshard; // ZeRO-3: they decide which gathers run, so they must match too
    int64_t debug_params;      // ZeRO-3: VESCALE_DEBUG=params names a read after a release collectively
} _vs_dsummary;

/* All-gather of `bytes` per rank of host memory (device buffers in between on
   the device path, where the communicator wants them). */
_VS_DDP_PRIVATE vs_result _vs_ddp_gather_host(vs_ddp* d, vs_comm* c, const void* send, void* recv, size_t bytes)
{
#ifdef _VS_DDP_CUDA
    if (d->dev) {
        size_t total = bytes * (size_t)vs_comm_size(c);
        char* buf = (char*)vs_device_alloc(d->world, total + bytes);
        if (!buf) return vs_set_error(VS_ERR_NOMEM, "vs_ddp_finalize: out of device memory");
        cudaError_t e = cudaMemcpy(buf + total, send, bytes, cudaMemcpyDefault);
        vs_result r = e == cudaSuccess ? VS_OK : _vs_ddp_cuerr(e, "cudaMemcpy");
        if (!r) r = vs_all_gather(c, buf + total, buf, bytes, VS_U8, NULL); // blocking: complete on return
        if (!r && (e = cudaMemcpy(recv, buf, total, cudaMemcpyDefault)) != cudaSuccess) r = _vs_ddp_cuerr(e, "cudaMemcpy");
        vs_device_free(d->world, buf);
        return r;
    }
#endif
    (void)d;
    return vs_all_gather(c, send, recv, bytes, VS_U8, NULL);
}

/* "'fc1.weight' f32 [16, 8] [Replicate, Shard(0)] group 0" */
_VS_DDP_PRIVATE void _vs_ddp_print_str(const vs_ddp* d, const _vs_dprint* f, char* buf, size_t cap)
{
    if (!f->present) {
        snprintf(buf, cap, "no such parameter");
        return;
    }
    vs_layout L;
    memset(&L, 0, sizeof L);
    L.mesh = d->mesh;
    for (int k = 0; k < vs_mesh_ndims(d->mesh); k++) {
        L.p[k].kind = (vs_placement_kind)f->pl[k][0];
        if (L.p[k].kind == VS_PLACE_SHARD) L.p[k].dim = (int)f->pl[k][1];
        if (L.p[k].kind == VS_PLACE_PARTIAL) L.p[k].op = (vs_op)f->pl[k][1];
    }
    char sh[200], pl[VS_MESH_MAX_DIMS * 24 + 8];
    int64_t shape[VS_TENSOR_MAX_DIMS];
    memcpy(shape, f->shape, sizeof shape);
    vs_layout_format(&L, pl, sizeof pl);
    snprintf(buf, cap, "'%s' %s %s %s group %lld%s%s ready_group %lld", f->name, vs_dtype_name((vs_dtype)f->dtype),
             _vs_ddp_shape_str(sh, sizeof sh, (int)(f->ndim < VS_TENSOR_MAX_DIMS ? f->ndim : VS_TENSOR_MAX_DIMS), shape),
             pl, (long long)f->group, f->no_decay ? " no_decay" : "", f->storage ? " trainer-owned storage" : "",
             (long long)f->ready_group);
}

_VS_DDP_PRIVATE const char* _vs_ddp_print_diff(const _vs_dprint* a, const _vs_dprint* b)
{
    if (a->present != b->present) return "parameter count";
    if (a->name_hash != b->name_hash || strcmp(a->name, b->name)) return "name";
    if (a->dtype != b->dtype) return "dtype";
    if (a->ndim != b->ndim || memcmp(a->shape, b->shape, sizeof a->shape)) return "global shape";
    if (memcmp(a->pl, b->pl, sizeof a->pl)) return "placements";
    if (a->group != b->group) return "optimizer group";
    if (a->storage != b->storage) return "storage (trainer-owned or not)";
    if (a->ready_group != b->ready_group) return "ready_group";
    return "no_decay";
}

/* After the summaries differ in their parameters: finds the first parameter
   where some rank differs from rank 0 and names it (every rank the same). */
_VS_DDP_PRIVATE vs_result _vs_ddp_disagree(vs_ddp* d, vs_mesh* chk, const char* dims, const _vs_dsummary* all,
                                           uint64_t* fps, _vs_dprint* prints)
{
    vs_comm* c = vs_mesh_comm(chk);
    int G = vs_mesh_nranks(chk);
    int64_t maxn = 0;
    for (int g = 0; g < G; g++)
        if (all[g].nparams > maxn) maxn = all[g].nparams;
    // every rank's prints' hashes, padded to the longest list
    uint64_t* row = _VS_DDP_NEW(d->world, uint64_t, (size_t)maxn + 1);
    if (!row) return vs_set_error(VS_ERR_NOMEM, "vs_ddp_finalize: out of memory checking that the ranks agree");
    for (int i = 0; i < d->nparams; i++) {
        _vs_dprint f;
        _vs_ddp_print(d, i, &f);
        row[i] = _vs_ddp_fnv(_VS_DDP_FNV0, &f, sizeof f);
    }
    vs_result r = _vs_ddp_gather_host(d, c, row, fps, (size_t)maxn * sizeof *row);
    vs_free(d->world, row);
    if (r) return r;
    int64_t first = maxn;
    for (int g = 1; g < G; g++)
        for (int64_t i = 0; i < first; i++)
            if (fps[(size_t)g * (size_t)maxn + (size_t)i] != fps[i]) {
                first = i;
                break;
            }
    if (first == maxn) first = 0; // not reached: the digests differ, so some print does
    _vs_dprint f;
    _vs_ddp_print(d, (int)first, &f);
    if ((r = _vs_ddp_gather_host(d, c, &f, prints, sizeof f))) return r;
    int odd = G > 1 ? 1 : 0;
    while (odd < G - 1 && !memcmp(&prints[odd], &prints[0], sizeof f)) odd++;
    char a[512], b[512];
    const _vs_dprint* named = prints[0].present ? &prints[0] : &prints[odd];
    _vs_ddp_print_str(d, &prints[0], a, sizeof a);
    _vs_ddp_print_str(d, &prints[odd], b, sizeof b);
    return vs_set_error(VS_ERR_MISMATCH,
                        "vs_ddp_finalize: ranks disagree on parameter %lld ('%s') (over mesh dims %s): %s differs: "
                        "world rank %d has %s; world rank %d has %s (%lld against %lld parameters)",
                        (long long)first, named->name, dims, _vs_ddp_print_diff(&prints[0], &prints[odd]),
                        vs_mesh_global_rank(chk, 0), a, vs_mesh_global_rank(chk, odd), b, (long long)all[0].nparams,
                        (long long)all[odd].nparams);
}

/* The ranks of `chk` (every mesh dim but PP) agree on the DDP settings and on
   every parameter, or VS_ERR_MISMATCH on every rank naming the first difference.
   One all-gather of a summary when they agree. Every rank takes the same
   branches: they all decide on the same gathered data. */
_VS_DDP_PRIVATE vs_result _vs_ddp_agree(vs_ddp* d, vs_mesh* chk, const char* dims)
{
    int G = vs_mesh_nranks(chk);
    _vs_dsummary mine;
    memset(&mine, 0, sizeof mine);
    mine.nparams = d->nparams;
    mine.digest = _VS_DDP_FNV0;
    for (int i = 0; i < d->nparams; i++) {
        _vs_dprint f;
        _vs_ddp_print(d, i, &f);
        mine.digest = _vs_ddp_fnv(mine.digest, &f, sizeof f);
    }
    mine.zero = d->desc.zero;
    mine.bucket_bytes = d->desc.bucket_bytes;
    mine.grad_fp32 = d->desc.grad_fp32 != 0;
    mine.kind = d->desc.optim.kind;
    mine.staged = d->desc.staged != 0;
    mine.finish_in_step = d->desc.finish_in_step != 0;
    mine.max_grad_norm = d->desc.max_grad_norm;
    mine.prefetch = d->desc.prefetch;
    mine.reshard = d->desc.reshard_after_forward;
    mine.debug_params = d->debug_params;
    _vs_dsummary* all = _VS_DDP_NEW(d->world, _vs_dsummary, G);
    if (!all) return vs_set_error(VS_ERR_NOMEM, "vs_ddp_finalize: out of memory checking that the ranks agree");
    vs_result r = _vs_ddp_gather_host(d, vs_mesh_comm(chk), &mine, all, sizeof mine);
    int odd = -1, odd3 = -1, same = 1;
    int64_t maxn = 0;
    for (int g = 0; g < G && !r; g++) {
        if (odd < 0 && (all[g].zero != all[0].zero || all[g].bucket_bytes != all[0].bucket_bytes ||
                        all[g].grad_fp32 != all[0].grad_fp32 || all[g].kind != all[0].kind ||
                        all[g].staged != all[0].staged))
            odd = g;
        if (odd3 < 0 && all[0].zero == VS_ZERO_3 &&
            (all[g].prefetch != all[0].prefetch || all[g].reshard != all[0].reshard ||
             all[g].debug_params != all[0].debug_params))
            odd3 = g;
        if (all[g].nparams != all[0].nparams || all[g].digest != all[0].digest) same = 0;
        if (all[g].nparams > maxn) maxn = all[g].nparams;
    }
    if (!r && odd >= 0)
        r = vs_set_error(VS_ERR_MISMATCH,
                         "vs_ddp_finalize: ranks disagree on the DDP settings (over mesh dims %s): world rank %d has "
                         "zero stage %lld, bucket_bytes %lld, grad_fp32 %lld, optimizer kind %lld, staged %lld; world "
                         "rank %d has %lld, %lld, %lld, %lld, %lld",
                         dims, vs_mesh_global_rank(chk, 0), (long long)all[0].zero, (long long)all[0].bucket_bytes,
                         (long long)all[0].grad_fp32, (long long)all[0].kind, (long long)all[0].staged,
                         vs_mesh_global_rank(chk, odd), (long long)all[odd].zero, (long long)all[odd].bucket_bytes,
                         (long long)all[odd].grad_fp32, (long long)all[odd].kind, (long long)all[odd].staged);
    for (int g = 1; g < G && !r; g++)
        if (all[g].finish_in_step != all[0].finish_in_step || all[g].max_grad_norm != all[0].max_grad_norm)
            r = vs_set_error(VS_ERR_MISMATCH, "vs_ddp_finalize: ranks disagree on vs_ddp_step's own sync and clip (over "
                             "mesh dims %s): world rank %d has finish_in_step %lld, max_grad_norm %g; world rank %d "
                             "has %lld, %g", dims, vs_mesh_global_rank(chk, 0), (long long)all[0].finish_in_step,
                             all[0].max_grad_norm, vs_mesh_global_rank(chk, g), (long long)all[g].finish_in_step,
                             all[g].max_grad_norm);
    if (!r && odd < 0 && odd3 >= 0)
        r = vs_set_error(VS_ERR_MISMATCH,
                         "vs_ddp_finalize: ranks disagree on the ZeRO-3 settings (over mesh dims %s): world rank %d has "
                         "prefetch %lld, reshard_after_forward %lld, VESCALE_DEBUG=params %lld; world rank %d has %lld, "
                         "%lld, %lld", dims, vs_mesh_global_rank(chk, 0), (long long)all[0].prefetch,
                         (long long)all[0].reshard, (long long)all[0].debug_params, vs_mesh_global_rank(chk, odd3),
                         (long long)all[odd3].prefetch, (long long)all[odd3].reshard, (long long)all[odd3].debug_params);
    if (!r && !same) {
        uint64_t* fps = _VS_DDP_NEW(d->world, uint64_t, (size_t)G * (size_t)maxn + 1);
        _vs_dprint* prints = _VS_DDP_NEW(d->world, _vs_dprint, G);
        if (fps && prints)
            r = _vs_ddp_disagree(d, chk, dims, all, fps, prints);
        else
            r = vs_set_error(VS_ERR_NOMEM, "vs_ddp_finalize: out of memory checking that the ranks agree");
        vs_free(d->world, fps);
        vs_free(d->world, prints);
    }
    vs_free(d->world, all);
    return r;
}

// >>ddp ------------------------------------------------------------------------
// (buffers, bucket layout, init, parameters)

/* Buffers and kernels on the host or, with device buffers, on the trainer's stream. */
#ifdef _VS_DDP_CUDA
_VS_DDP_PRIVATE cudaStream_t _vs_ddp_stream(const vs_ddp* d) { return d->cu ? d->cu->stream : (cudaStream_t)d->desc.stream; }
#define _VS_DDP_ON_DEVICE(d) ((d)->dev)
#define _VS_DDP_DEV(d, call) \
    do { \
        if ((d)->dev) { \
            cudaError_t e_ = (call); \
            return e_ == cudaSuccess ? VS_OK : _vs_ddp_cuerr(e_, #call); \
        } \
    } while (0)
#else
#define _VS_DDP_ON_DEVICE(d) 0
#define _VS_DDP_DEV(d, call) (void)(d)
#endif

/* Zeroed buffers through the world's allocator hooks (of the bytes asked, so
   vs_ddp_memory_usage is what they take; at least one). */
_VS_DDP_PRIVATE void* _vs_ddp_zalloc(const vs_ddp* d, size_t bytes)
{
    bytes = bytes ? bytes : 1;
#ifdef _VS_DDP_CUDA
    if (d->dev) {
        /* on the trainer's stream, which is what uses the buffer (a cudaMemset on
           the legacy stream is asynchronous and unordered with a non-blocking
           stream: found by the strict stand-in's missing-wait check) */
        void* p = vs_device_alloc(d->world, bytes);
        if (p && cudaMemsetAsync(p, 0, bytes, _vs_ddp_stream(d)) != cudaSuccess) {
            vs_device_free(d->world, p);
            p = NULL;
        }
        return p;
    }
#endif
    void* p = vs_alloc(d->world, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

_VS_DDP_PRIVATE void _vs_ddp_hfree(const vs_ddp* d, void* p)
{
    if (_VS_DDP_ON_DEVICE(d))
        vs_device_free(d->world, p);
    else
        vs_free(d->world, p);
}

_VS_DDP_PRIVATE vs_result _vs_ddp_zero(const vs_ddp* d, void* p, size_t bytes)
{
    _VS_DDP_DEV(d, cudaMemsetAsync(p, 0, bytes, _vs_ddp_stream(d)));
    memset(p, 0, bytes);
    return VS_OK;
}

/* dst <- src; either may be host or device memory on the device path. */
_VS_DDP_PRIVATE vs_result _vs_ddp_copy(const vs_ddp* d, void* dst, const void* src, size_t bytes)
{
    _VS_DDP_DEV(d, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, _vs_ddp_stream(d)));
    memcpy(dst, src, bytes);
    return VS_OK;
}

_VS_DDP_PRIVATE vs_result _vs_ddp_to_f32(const vs_ddp* d, float* dst, const void* src, vs_dtype t, int64_t n)
{
    int kt = _vs_kdt(t);
    long long nn = n;
    void* args[] = {&dst, &src, &kt, &nn};
    if (d->cu) return _vs_ddp_kernel(d, _VS_KI_TO_F32, n, args);
    _vs_hk_to_f32(dst, src, kt, nn);
    return VS_OK;
}

_VS_DDP_PRIVATE vs_result _vs_ddp_from_f32(const vs_ddp* d, void* dst, vs_dtype t, const float* src, int64_t n)
{
    int kt = _vs_kdt(t);
    long long nn = n;
    void* args[] = {&dst, &kt, &src, &nn};
    if (d->cu) return _vs_ddp_kernel(d, _VS_KI_FROM_F32, n, args);
    _vs_hk_from_f32(dst, kt, src, nn);
    return VS_OK;
}

_VS_DDP_PRIVATE vs_result _vs_ddp_add_f32(const vs_ddp* d, float* acc, const void* src, vs_dtype t, int64_t n)
{
    int kt = _vs_kdt(t);
    long long nn = n;
    void* args[] = {&acc, &src, &kt, &nn};
    if (d->cu) return _vs_ddp_kernel(d, _VS_KI_ADD_F32, n, args);
    _vs_hk_add_f32(acc, src, kt, nn);
    return VS_OK;
}

_VS_DDP_PRIVATE vs_result _vs_ddp_scale(const vs_ddp* d, void* a, vs_dtype t, int64_t n, float s)
{
    int kt = _vs_kdt(t);
    long long nn = n;
    void* args[] = {&a, &kt, &nn, &s};
    if (d->cu) return _vs_ddp_kernel(d, _VS_KI_SCALE, n, args);
    _vs_hk_scale(a, kt, nn, s);
    return VS_OK;
}

/* The mesh counts the DDPs on it (vs_mesh_retain), so vs_mesh_free refuses while
   one is alive. */
_VS_DDP_PRIVATE void _vs_ddp_mesh_use(vs_mesh* m, int delta)
{
    if (delta > 0)
        vs_mesh_retain(m);
    else
        vs_mesh_release(m);
}

/* Every zero-is-default value of a desc, resolved in this one place (sokol's
   _sg_desc_defaults): vs_ddp_init keeps the result, vs_ddp_query_desc returns it.
   It checks nothing (vs_ddp_init checks the result; ngroups must be in range);
   a resolved value is marked as meant (_set 1), so resolving again changes
   nothing. The dims need the mesh: dp_dim and pp_dim become names, pp_dim NULL
   when the mesh has no "PP" dim. */
_VS_DDP_PRIVATE void _vs_ddp_desc_defaults(vs_ddp_desc* d)
{
    vs_optim_desc* o = &d->optim;
    if (d->bucket_bytes == 0) d->bucket_bytes = VS_DDP_DEFAULT_BUCKET_BYTES;
    if (d->zero2_buffers == 0) d->zero2_buffers = VS_DDP_DEFAULT_ZERO2_BUFFERS;
    d->finish_in_step = d->finish_in_step || d->max_grad_norm > 0; // (a clip needs the sync)
    if (d->reshard_after_forward == 0 && !d->reshard_after_forward_set) d->reshard_after_forward = 1;
    if (d->prefetch == 0 && !d->prefetch_set) d->prefetch = 1;
    d->reshard_after_forward_set = d->prefetch_set = 1;
    if (o->beta1 == 0 && !o->beta1_set) o->beta1 = 0.9;
    if (o->beta2 == 0 && !o->beta2_set) o->beta2 = 0.999;
    if (o->eps == 0 && !o->eps_set) o->eps = 1e-8;
    o->beta1_set = o->beta2_set = o->eps_set = 1;
    if (o->ngroups == 0) o->ngroups = 1; // group 0 only: the fields above
    for (int g = 1; g < o->ngroups && g < VS_DDP_MAX_GROUPS; g++) {
        if (o->groups[g].lr_scale == 0 && !o->groups[g].lr_scale_set) o->groups[g].lr_scale = 1.0;
        o->groups[g].lr_scale_set = 1;
    }
    vs_mesh* m = d->mesh;
    if (!m) return;
    const char *dpr = NULL, *dps = NULL;
    for (int k = 0; k < vs_mesh_ndims(m); k++) {
        const char* nm = vs_mesh_dim_name(m, k);
        if (!strcmp(nm, "PP") && !d->pp_dim) d->pp_dim = nm;
        if (!strcmp(nm, "DPR")) dpr = nm;
        if (!strcmp(nm, "DPS")) dps = nm;
    }
    if (!d->dp_replicate_dim && dpr && dps) d->dp_replicate_dim = dpr;
    if (!d->dp_dim) d->dp_dim = d->dp_replicate_dim ? "DPS" : vs_mesh_ndims(m) == 1 ? vs_mesh_dim_name(m, 0) : "DP";
    vs_clear_error();
}

/* "(PP, DPR, DPS, TP)": the mesh's dims, for messages. */
_VS_DDP_PRIVATE const char* _vs_ddp_dims_str(vs_mesh* m, char* buf, size_t cap)
{
    size_t n = 0;
    for (int k = 0; k < vs_mesh_ndims(m) && n < cap; k++) {
        const char* name = vs_mesh_dim_name(m, k); // (NULL only for a bad dim: gcc -O3 cannot tell)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", k ? ", " : "(", name ? name : "?");
    }
    if (n < cap) snprintf(buf + n, cap - n, ")");
    return buf;
}

/* The DP group setup's first half (the second: _vs_ddp_groups): the dims of
   resolved desc rd on mesh m, dims[0] the DP dim (HSDP: the shard dim),
   dims[1] the pipeline dim and dims[2] HSDP's replicate dim (-1: none), or
   VS_ERR_INVALID naming the value. */
/* m has a dim named dim: a probe that sets no error (vs_mesh_dim_index's
   miss is an error, logged at warn: this one runs on every vs_ddp_init). */
_VS_DDP_PRIVATE int _vs_ddp_has_dim(const vs_mesh* m, const char* dim)
{
    for (int i = 0; i < vs_mesh_ndims(m); i++)
        if (!strcmp(vs_mesh_dim_name(m, i), dim)) return 1;
    return 0;
}

_VS_DDP_PRIVATE vs_result _vs_ddp_dims(vs_mesh* m, const vs_ddp_desc* rd, int dims[3])
{
    const char *fn = "vs_ddp_init", *rdim = rd->dp_replicate_dim;
    char all[VS_MESH_MAX_DIMS * (VS_MESH_NAME_MAX + 2) + 4];
    _vs_ddp_dims_str(m, all, sizeof all);
    dims[0] = dims[1] = dims[2] = -1;
    if (rdim && vs_mesh_ndims(m) == 1)
        return vs_set_error(VS_ERR_INVALID, "%s: dp_replicate_dim '%s' with a 1-D mesh %s: HSDP needs a replicate dim "
                            "and a shard dim (dp_dim)", fn, rdim, all);
    if (rdim && (dims[2] = vs_mesh_dim_index(m, rdim)) < 0)
        return vs_set_error(VS_ERR_INVALID, "%s: dp_replicate_dim '%s' is not a dim of the mesh %s", fn, rdim, all);
    if ((dims[0] = vs_mesh_dim_index(m, rd->dp_dim)) < 0) {
        int r = _vs_ddp_has_dim(m, "DPR"), s = _vs_ddp_has_dim(m, "DPS");
        return vs_set_error(VS_ERR_INVALID, "%s: dp_dim '%s'%s is not a dim of the mesh %s%s", fn, rd->dp_dim,
                            rdim ? " (HSDP's shard dim)" : "", all,
                            !rdim && r != s ? ": HSDP needs both 'DPR' (replicate) and 'DPS' (shard)" : "");
    }
    /* A mesh naming one of DPR/DPS beside its DP dim ("DPR" x "DP") would be a
       DP over dp_dim alone: the other dim's replicas would train apart, silently. */
    int has_r = _vs_ddp_has_dim(m, "DPR"), has_s = _vs_ddp_has_dim(m, "DPS");
    if (!rdim && has_r != has_s)
        return vs_set_error(VS_ERR_INVALID, "%s: the mesh %s has '%s' but no '%s': HSDP needs both 'DPR' (replicate) "
                            "and 'DPS' (shard), or set dp_replicate_dim and dp_dim", fn, all, has_r ? "DPR" : "DPS",
                            has_r ? "DPS" : "DPR");
    if (rd->pp_dim && (dims[1] = vs_mesh_dim_index(m, rd->pp_dim)) < 0)
        return vs_set_error(VS_ERR_INVALID, "%s: pp_dim '%s' is not a dim of the mesh %s", fn, rd->pp_dim, all);
    if (rdim && (dims[2] == dims[0] || dims[2] == dims[1]))
        return vs_set_error(VS_ERR_INVALID, "%s: dp_replicate_dim '%s' is %s too: HSDP's replicate dim must be "
                            "another dim", fn, rdim, dims[2] == dims[0] ? "dp_dim (the shard dim)" : "pp_dim");
    vs_clear_error(); // (the probes above)
    return VS_OK;
}

/* Checks every number the chosen optimizer uses (defaults resolved). */
_VS_DDP_PRIVATE vs_result _vs_ddp_optim_check(const vs_optim_desc* o)
{
    const char* fn = "vs_ddp_init";
    if (o->kind == VS_OPTIM_ADAMW) {
        if (!(o->beta1 >= 0 && o->beta1 < 1))
            return vs_set_error(VS_ERR_INVALID, "%s: optim.beta1 %g out of range [0, 1)", fn, o->beta1);
        if (!(o->beta2 >= 0 && o->beta2 < 1))
            return vs_set_error(VS_ERR_INVALID, "%s: optim.beta2 %g out of range [0, 1)", fn, o->beta2);
        if (!_vs_ddp_finite(o->eps) || o->eps < 0)
            return vs_set_error(VS_ERR_INVALID, "%s: optim.eps %g must be finite and >= 0", fn, o->eps);
    }
    if (o->kind == VS_OPTIM_SGD) {
        if (!_vs_ddp_finite(o->momentum) || o->momentum < 0)
            return vs_set_error(VS_ERR_INVALID, "%s: optim.momentum %g must be finite and >= 0", fn, o->momentum);
        if (o->nesterov && !(o->momentum > 0))
            return vs_set_error(VS_ERR_INVALID, "%s: optim.nesterov needs momentum > 0 (momentum is %g)", fn,
                                o->momentum);
    }
    if (!_vs_ddp_finite(o->weight_decay) || o->weight_decay < 0)
        return vs_set_error(VS_ERR_INVALID, "%s: optim.weight_decay %g must be finite and >= 0", fn, o->weight_decay);
    for (int g = 1; g < o->ngroups; g++) {
        if (!_vs_ddp_finite(o->groups[g].lr_scale) || o->groups[g].lr_scale < 0)
            return vs_set_error(VS_ERR_INVALID, "%s: optim.groups[%d].lr_scale %g must be finite and >= 0", fn, g,
                                o->groups[g].lr_scale);
        if (!_vs_ddp_finite(o->groups[g].weight_decay) || o->groups[g].weight_decay < 0)
            return vs_set_error(VS_ERR_INVALID, "%s: optim.groups[%d].weight_decay %g must be finite and >= 0", fn, g,
                                o->groups[g].weight_decay);
    }
    return VS_OK;
}

VS_API vs_result vs_ddp_init(const vs_ddp_desc* desc, vs_ddp** out)
{
    if (!desc || !out) return vs_set_error(VS_ERR_NULL, "vs_ddp_init: %s is NULL", desc ? "out" : "desc");
    *out = NULL;
    if (!desc->mesh && !desc->world)
        return vs_set_error(VS_ERR_NULL, "vs_ddp_init: mesh is NULL (and no world for a DP over all its ranks)");
    if (desc->mesh && desc->world)
        return vs_set_error(VS_ERR_INVALID, "vs_ddp_init: mesh and world both set (world: a DP over all its ranks, "
                                            "with mesh NULL)");
    if (desc->bucket_bytes < 0)
        return vs_set_error(VS_ERR_INVALID, "vs_ddp_init: bucket_bytes %lld must be > 0 (0 takes the default)",
                            (long long)desc->bucket_bytes);
    if ((int)desc->zero < 0 || desc->zero > VS_ZERO_3)
        return vs_set_error(VS_ERR_INVALID, "vs_ddp_init: zero stage %d (0, 1, 2 or 3)", (int)desc->zero);
    if (desc->reshard_after_forward < 0 || desc->reshard_after_forward > 1)
        return vs_set_error(VS_ERR_INVALID, "vs_ddp_init: reshard_after_forward %d (0 or 1)",
                            desc->reshard_after_forward);
    if (desc->prefetch < 0)
        return vs_set_error(VS_ERR_INVALID, "vs_ddp_init: prefetch %d < 0", desc->prefetch);
    if ((int)desc->optim.kind < 0 || desc->optim.kind > VS_OPTIM_CUSTOM)
        return vs_set_error(VS_ERR_INVALID, "vs_ddp_init: optimizer kind %d", (int)desc->optim.kind);
    if (desc->optim.kind == VS_OPTIM_CUSTOM && !desc->optim.step)
        return vs_set_error(VS_ERR_NULL, "vs_ddp_init: VS_OPTIM_CUSTOM needs optim.step");
    if (desc->optim.ngroups < 0 || desc->optim.ngroups > VS_DDP_MAX_GROUPS)
        return vs_set_error(VS_ERR_INVALID, "vs_ddp_init: ngroups %d out of range [0, %d]", desc->optim.ngroups,
                            VS_DDP_MAX_GROUPS);
    if (desc->zero2_buffers < 0)
        return vs_set_error(VS_ERR_INVALID, "vs_ddp_init: zero2_buffers %d < 0", desc->zero2_buffers);
    if (!_vs_ddp_finite(desc->max_grad_norm) || desc->max_grad_norm < 0)
        return vs_set_error(VS_ERR_INVALID, "vs_ddp_init: max_grad_norm %g must be finite and >= 0 (0: no clip in "
                                            "vs_ddp_step)", desc->max_grad_norm);
    vs_ddp_desc rd = *desc; // with the defaults resolved, kept below
    _vs_ddp_desc_defaults(&rd);
    vs_result rv = _vs_ddp_optim_check(&rd.optim);
    if (rv) return rv;
    // the world's debug modes as it resolved them (vs_world_desc.debug / vs_launch_desc.debug, else
    // VESCALE_DEBUG), parsed by the mesh's one parser
    unsigned dbg = 0;
    vs_world_desc wdesc;
    memset(&wdesc, 0, sizeof wdesc); // (gcc cannot see that a failed query leaves it unread)
    if ((rv = vs_world_query_desc(desc->mesh ? vs_mesh_world(desc->mesh) : desc->world, &wdesc)) ||
        (rv = vs_debug_modes(wdesc.debug ? wdesc.debug : "", &dbg)))
        return vs_set_error(rv, "vs_ddp_init: %s", vs_last_error());
    vs_mesh* m = desc->mesh;
    if (!m) { // desc->world: one dim over all its ranks
        vs_mesh_desc md;
        memset(&md, 0, sizeof md);
        md.shape[0] = vs_world_size(desc->world);
        if ((rv = vs_mesh_init(desc->world, &md, &m))) return vs_set_error(rv, "vs_ddp_init: %s", vs_last_error());
        rd.mesh = m;
        _vs_ddp_desc_defaults(&rd); // (again: the dims, now that there is a mesh)
    }
    int dims[3]; // the DP (HSDP: shard), pipeline and replicate dims
    rv = _vs_ddp_dims(m, &rd, dims);
    int dpi = dims[0], ppi = dims[1];
    vs_ddp* d = rv ? NULL : _VS_DDP_NEW(vs_mesh_world(m), vs_ddp, 1);
    if (!d) {
        if (!rv) rv = vs_set_error(VS_ERR_NOMEM, "vs_ddp_init: out of memory");
        if (m != desc->mesh) (void)vs_mesh_free(m);
        return rv;
    }
    d->desc = rd;
    d->desc.mesh = m, d->desc.world = NULL; // (the mesh made for a world too: checkpoints read it here)
    d->own_mesh = m != desc->mesh;
    // the dims by the mesh's names: the caller's strings are not kept
    d->desc.dp_dim = vs_mesh_dim_name(m, dpi);
    d->desc.pp_dim = ppi >= 0 ? vs_mesh_dim_name(m, ppi) : NULL;
    d->desc.dp_replicate_dim = dims[2] >= 0 ? vs_mesh_dim_name(m, dims[2]) : NULL;
    d->dpr_index = dims[2];
    d->mesh = m;
    d->world = vs_mesh_world(m);
    d->dp_index = dpi;
    d->pp_index = ppi;
    d->sync = 1;
    d->grad_norm = -1;
#ifdef _VS_DDP_CUDA
    d->dev = _VS_DDP_FORCE_DEVICE || vs_comm_device(vs_mesh_comm(m));
#endif
    d->debug_params = (dbg & VS_DEBUG_PARAMS) != 0; // vs_ddp_wait_params's checks
    vs_world_desc wd;
    memset(&wd, 0, sizeof wd);
    d->log_debug = vs_world_query_desc(d->world, &wd) == VS_OK && wd.log_level >= VS_LOG_DEBUG;
    _vs_ddp_mesh_use(m, +1);
    *out = d;
    return VS_OK;
}

VS_API vs_result vs_ddp_set_bucket_bytes(vs_ddp* d, int64_t bytes)
{
    if (!d) return vs_set_error(VS_ERR_NULL, "vs_ddp_set_bucket_bytes: ddp is NULL");
    if (d->finalized) return vs_set_error(VS_ERR_STATE, "vs_ddp_set_bucket_bytes: the buckets exist already (finalized)");
    if (bytes <= 0)
        return vs_set_error(VS_ERR_INVALID, "vs_ddp_set_bucket_bytes: bucket size %lld bytes; it must be > 0",
                            (long long)bytes);
    d->desc.bucket_bytes = bytes;
    return VS_OK;
}

/* Largest element count of one parameter: its bytes as f32 (the optimizer state,
   master weights and conversion space are f32) fit in int64 and size_t, with room
   for a bucket's padding. */
#define _VS_DDP_MAX_NUMEL ((int64_t)(((uint64_t)INT64_MAX < (uint64_t)SIZE_MAX ? (uint64_t)INT64_MAX : (uint64_t)SIZE_MAX) / 8))

/* VS_OK when the global element count of `shape` and its bytes fit (see above). */
_VS_DDP_PRIVATE vs_result _vs_ddp_check_size(const char* fn, const vs_ddp_param_desc* p)
{
    if (p->ndim < 0 || p->ndim > VS_TENSOR_MAX_DIMS) return VS_OK; // vs_layout_local names it
    int64_t n = 1;
    for (int k = 0; k < p->ndim; k++) {
        if (p->shape[k] < 0) return VS_OK; // likewise
        if (p->shape[k] == 0) return VS_OK;
    }
    for (int k = 0; k < p->ndim; k++) {
        if (n > _VS_DDP_MAX_NUMEL / p->shape[k]) {
            char sh[200];
            return vs_set_error(VS_ERR_INVALID,
                                "%s: '%s': shape %s of %s is too large: its element count or f32 byte size "
                                "overflows 64 bits (at most %lld elements)",
                                fn, p->name, _vs_ddp_shape_str(sh, sizeof sh, p->ndim, p->shape),
                                vs_dtype_name(p->dtype), (long long)_VS_DDP_MAX_NUMEL);
        }
        n *= p->shape[k];
    }
    return VS_OK;
}

/* vs_ddp_param_desc.storage and grad_storage: the rules of its comment. */
_VS_DDP_PRIVATE vs_result _vs_ddp_check_storage(const vs_ddp* d, const vs_ddp_param_desc* p)
{
    const char* fn = "vs_ddp_add_param";
    if (!p->storage && !p->grad_storage) return VS_OK;
    if (!p->storage || !p->grad_storage)
        return vs_set_error(VS_ERR_INVALID, "%s: '%s': storage and grad_storage go together (%s is NULL)", fn, p->name,
                            p->storage ? "grad_storage" : "storage");
    if (p->data)
        return vs_set_error(VS_ERR_INVALID, "%s: '%s': data and storage both given (storage holds the initial value)",
                            fn, p->name);
    if (d->desc.zero == VS_ZERO_2)
        return vs_set_error(VS_ERR_INVALID, "%s: '%s': trainer-owned storage under ZeRO-2: the gradient buffer is the "
                            "trainer's and full size, so ZeRO-2 would save nothing; use ZeRO-1", fn, p->name);
    if (d->desc.zero == VS_ZERO_3)
        return vs_set_error(VS_ERR_INVALID, "%s: '%s': trainer-owned storage under ZeRO-3: the full-size buffers it "
                            "gives are what ZeRO-3 keeps sharded (the gathered views are DDP's); register it without "
                            "storage and give the owned shards' with vs_ddp_set_owned_storage", fn, p->name);
    size_t pz = _vs_dsz(p->dtype), gz = _vs_dsz(d->desc.grad_fp32 && p->dtype != VS_F32 ? VS_F32 : p->dtype);
    if ((uintptr_t)p->storage % pz || (uintptr_t)p->grad_storage % gz)
        return vs_set_error(VS_ERR_INVALID, "%s: '%s': %s %p is not aligned to its element size (%zu bytes)", fn, p->name,
                            (uintptr_t)p->storage % pz ? "storage" : "grad_storage",
                            (uintptr_t)p->storage % pz ? p->storage : p->grad_storage,
                            (uintptr_t)p->storage % pz ? pz : gz);
#ifdef VESCALE_NCCL // (the mesh's pointer check: not in a mock device build)
    if (d->dev) {
        char what[160];
        snprintf(what, sizeof what, "%s: '%.100s'", fn, p->name);
        vs_result r = vs_device_check(what, "storage", p->storage);
        if (!r) r = vs_device_check(what, "grad_storage", p->grad_storage);
        if (r) return r;
    }
#endif
    return VS_OK;
}

_VS_DDP_PRIVATE vs_result _vs_ddp_add_one(vs_ddp* d, const vs_ddp_param_desc* p, int* index);
_VS_DDP_PRIVATE void _vs_ddp_param_release(vs_ddp* d, _vs_dparam* q);

/* vs_ddp_param_desc.layers > 1: `layers` parameters from one desc, or none. */
_VS_DDP_PRIVATE vs_result _vs_ddp_add_layers(vs_ddp* d, const vs_ddp_param_desc* p, int* index)
{
    const char* fn = "vs_ddp_add_param";
    const char* pat = p->name ? p->name : "";
    const char* at = strstr(pat, "%d");
    int pct = 0;
    for (const char* c = pat; *c; c++) pct += *c == '%';
    if (!at || pct != 1)
        return vs_set_error(VS_ERR_INVALID, "%s: '%s' with layers = %d needs one \"%%d\" (the layer) and no other '%%'",
                            fn, pat, p->layers);
    if (p->ready_group > 0 && p->ready_group > INT_MAX - (p->layers - 1))
        return vs_set_error(VS_ERR_INVALID, "%s: '%s': ready_group %d + layers %d overflows", fn, pat, p->ready_group,
                            p->layers);
    int first = d->nparams;
    vs_result r = VS_OK;
    size_t stride = 0, gstride = 0; // bytes of one local shard and of its gradient, learned from layer 0
    for (int l = 0; l < p->layers && !r; l++) {
        char name[256];
        int n = snprintf(name, sizeof name, "%.*s%d%s", (int)(at - pat), pat, l, at + 2);
        if (n < 0 || (size_t)n >= sizeof name) {
            r = vs_set_error(VS_ERR_INVALID, "%s: '%s': layer %d's name is longer than %d bytes", fn, pat, l,
                             (int)sizeof name - 1);
            break;
        }
        vs_ddp_param_desc one = *p;
        one.name = name;
        one.layers = 1;
        if (p->ready_group) one.ready_group = p->ready_group + l;
        if (p->storage) one.storage = (char*)p->storage + stride * (size_t)l;
        if (p->grad_storage) one.grad_storage = (char*)p->grad_storage + gstride * (size_t)l;
        if (p->data) one.data = (const char*)p->data + stride * (size_t)l;
        r = _vs_ddp_add_one(d, &one, NULL);
        if (!r && l == 0) {
            const _vs_dparam* q = &d->params[first];
            stride = (size_t)q->numel * _vs_dsz(q->dtype), gstride = (size_t)q->numel * _vs_dsz(q->gdtype);
        }
    }
    if (r) { // none of them: the ones added go again (the message stays the failure's)
        while (d->nparams > first) _vs_ddp_param_release(d, &d->params[--d->nparams]);
        return r;
    }
    if (index) *index = first;
    return VS_OK;
}

VS_API vs_result vs_ddp_add_param(vs_ddp* d, const vs_ddp_param_desc* p, int* index)
{
    if (!d || !p) return vs_set_error(VS_ERR_NULL, "vs_ddp_add_param: %s is NULL", d ? "param desc" : "ddp");
    if (p->layers < 0 || p->layers > (1 << 20))
        return vs_set_error(VS_ERR_INVALID, "vs_ddp_add_param: '%s': layers %d out of range [0, %d]",
                            p->name ? p->name : "", p->layers, 1 << 20);
    if (p->layers > 1 && !d->finalized) return _vs_ddp_add_layers(d, p, index);
    return _vs_ddp_add_one(d, p, index);
}

_VS_DDP_PRIVATE void _vs_ddp_param_release(vs_ddp* d, _vs_dparam* q)
{
    vs_free(d->world, q->name);
    vs_free(d->world, q->init);
    memset(q, 0, sizeof *q);
}

_VS_DDP_PRIVATE vs_result _vs_ddp_add_one(vs_ddp* d, const vs_ddp_param_desc* p, int* index)
{
    const char* fn = "vs_ddp_add_param";
    if (!d || !p) return vs_set_error(VS_ERR_NULL, "%s: %s is NULL", fn, d ? "param desc" : "ddp");
    if (d->finalized) return vs_set_error(VS_ERR_STATE, "%s: '%s' added after vs_ddp_finalize", fn, p->name ? p->name : "");
    if (!p->name || !*p->name) return vs_set_error(VS_ERR_INVALID, "%s: a parameter needs a name", fn);
    if (p->dtype != VS_F32 && p->dtype != VS_BF16 && p->dtype != VS_F16)
        return vs_set_error(VS_ERR_INVALID, "%s: '%s' has dtype %s; the optimizers take f32, bf16 or f16", fn, p->name,
                            vs_dtype_name(p->dtype));
    if (p->group < 0 || p->group >= d->desc.optim.ngroups) // resolved: at least 1
        return vs_set_error(VS_ERR_INVALID, "%s: '%s' is in group %d, there are %d", fn, p->name, p->group,
                            d->desc.optim.ngroups);
    for (int i = 0; i < d->nparams; i++)
        if (!strcmp(d->params[i].name, p->name))
            return vs_set_error(VS_ERR_INVALID, "%s: '%s' registered twice", fn, p->name);
    vs_layout L;
    memset(&L, 0, sizeof L);
    L.mesh = d->mesh;
    memcpy(L.p, p->placements, sizeof L.p);
    int nd = vs_mesh_ndims(d->mesh);
    for (int k = nd; k < VS_MESH_MAX_DIMS; k++) L.p[k] = vs_replicate();
    for (int j = 0; j < 2; j++) { // the DP dim, and HSDP's replicate dim
        int dim = j ? d->dpr_index : d->dp_index;
        if (dim >= 0 && L.p[dim].kind != VS_PLACE_REPLICATE)
            return vs_set_error(VS_ERR_INVALID, "%s: '%s' must be Replicate along the DP dim %s", fn, p->name,
                                vs_mesh_dim_name(d->mesh, dim));
    }
    if (L.p[d->dp_index].kind != VS_PLACE_REPLICATE)
        return vs_set_error(VS_ERR_INVALID, "%s: '%s' must be Replicate along the DP dim %s", fn, p->name,
                            vs_mesh_dim_name(d->mesh, d->dp_index));
    if (d->desc.zero == VS_ZERO_3 && p->ready_group == 0)
        return vs_set_error(VS_ERR_INVALID, "%s: '%s' has ready_group 0: ZeRO-3 gathers parameters by ready group "
                            "(vs_ddp_gather), so each needs a nonzero one (a layer's, say)", fn, p->name);
    vs_result r = _vs_ddp_check_size(fn, p);
    if (r) return r;
    if ((r = _vs_ddp_check_storage(d, p))) return r;
    int64_t ls[VS_TENSOR_MAX_DIMS], off[VS_TENSOR_MAX_DIMS];
    r = vs_layout_local(&L, p->ndim, p->shape, vs_mesh_rank(d->mesh), ls, off);
    if (r) {
        char why[256];
        snprintf(why, sizeof why, "%.200s", vs_last_error());
        return vs_set_error(r, "%s: '%s': %s", fn, p->name, why);
    }
    if (d->nparams == d->cap) {
        int cap = d->cap ? 2 * d->cap : 16;
        _vs_dparam* np = _VS_DDP_NEW(d->world, _vs_dparam, cap);
        if (!np) return vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
        if (d->nparams) memcpy(np, d->params, sizeof *np * (size_t)d->nparams);
        vs_free(d->world, d->params);
        d->params = np;
        d->cap = cap;
    }
    _vs_dparam* q = &d->params[d->nparams];
    memset(q, 0, sizeof *q);
    q->numel = 1;
    for (int k = 0; k < p->ndim; k++) q->numel *= ls[k]; // <= the global count, checked above
    size_t nlen = strlen(p->name);
    q->name = (char*)vs_alloc(d->world, nlen + 1);
    /* storage: no copy; ZeRO-3 without data: none either (the owned buffers
       finalize makes start zeroed; registration stays at 1/DP, and a shape too
       large for memory fails there). The others keep a zeroed copy, so that
       such a shape fails here. */
    int none = p->storage || (!p->data && d->desc.zero == VS_ZERO_3);
    q->init = none ? NULL : vs_alloc(d->world, (size_t)q->numel * _vs_dsz(p->dtype) + 1);
    if (!q->name || (!q->init && !none)) {
        vs_free(d->world, q->name);
        vs_free(d->world, q->init);
        return vs_set_error(VS_ERR_NOMEM, "%s: out of memory for '%s'", fn, p->name);
    }
    memcpy(q->name, p->name, nlen + 1);
    if (p->storage) {
        q->pext = p->storage, q->gext = p->grad_storage;
    } else if (p->data && _VS_DDP_ON_DEVICE(d)) { // host or device memory
#ifdef _VS_DDP_CUDA
        cudaError_t e = cudaMemcpy(q->init, p->data, (size_t)q->numel * _vs_dsz(p->dtype), cudaMemcpyDefault);
        if (e != cudaSuccess) {
            vs_free(d->world, q->name);
            vs_free(d->world, q->init);
            return vs_set_error(VS_ERR_BACKEND, "%s: reading the data of '%s': %s", fn, p->name, cudaGetErrorString(e));
        }
#endif
    } else if (p->data)
        memcpy(q->init, p->data, (size_t)q->numel * _vs_dsz(p->dtype));
    else if (q->init)
        memset(q->init, 0, (size_t)q->numel * _vs_dsz(p->dtype));
    q->dtype = p->dtype;
    q->gdtype = (d->desc.grad_fp32 && p->dtype != VS_F32) ? VS_F32 : p->dtype;
    q->ndim = p->ndim;
    memcpy(q->shape, p->shape, sizeof q->shape);
    for (int k = 0; k < p->ndim; k++) q->lshape[k] = ls[k], q->loff[k] = off[k];
    memcpy(q->pl, L.p, sizeof q->pl);
    q->group = p->group;
    q->no_decay = p->no_decay;
    q->tied_copy = p->tied_copy != 0;
    q->rgroup = p->ready_group;
    q->reshard = -1;
    q->bucket = -1;
    if (index) *index = d->nparams;
    d->nparams++;
    return VS_OK;
}

_VS_DDP_PRIVATE unsigned _vs_ddp_partial_mask(const vs_ddp* d, const _vs_dparam* q)
{
    unsigned mask = 0;
    for (int k = 0; k < vs_mesh_ndims(d->mesh); k++)
        if (k != d->dp_index && q->pl[k].kind == VS_PLACE_PARTIAL) mask |= 1u << k;
    return mask;
}

/* An element of q is counted by the grad norm on exactly one rank: the DP rank
   that owns it, and along every other dim where q is not sharded (and not the
   pipeline dim, whose stages hold distinct parameters) coordinate 0 only. */
_VS_DDP_PRIVATE int _vs_ddp_counted(const vs_ddp* d, const _vs_dparam* q)
{
    if (q->tied_copy) return 0; // counted on the stage that holds the other copy
    int coord[VS_MESH_MAX_DIMS];
    vs_mesh_coord(d->mesh, coord);
    for (int k = 0; k < vs_mesh_ndims(d->mesh); k++) {
        if (k == d->dp_index || k == d->pp_index || q->pl[k].kind == VS_PLACE_SHARD) continue;
        if (coord[k] != 0) return 0;
    }
    return 1;
}

_VS_DDP_PRIVATE void _vs_ddp_unguard(vs_ddp* d, _vs_dbucket* k);
_VS_DDP_PRIVATE void _vs_ddp_zpool_free(vs_ddp* d, void* p);

_VS_DDP_PRIVATE void _vs_ddp_release(vs_ddp* d)
{
    (void)_vs_ddp_sync(d); // kernels still reading or writing the buffers
    for (int b = 0; b < d->nbuckets; b++) { // every collective first: a free beside one in flight can deadlock (NCCL)
        _vs_dbucket* k = &d->buckets[b];
        if (k->work) vs_wait(k->work);
        if (k->pwork) vs_wait(k->pwork);
        k->work = k->pwork = NULL;
    }
    for (int b = 0; b < d->nbuckets; b++) {
        _vs_dbucket* k = &d->buckets[b];
        _vs_ddp_unguard(d, k);
        if (!k->pown) _vs_ddp_hfree(d, k->param);
        if (d->desc.zero < VS_ZERO_2 && !k->ext) _vs_ddp_hfree(d, k->grad);
        k->zbuf = NULL, k->zstate = _VS_Z3_REST; // (the gathered pool's, freed below)
        _vs_ddp_hfree(d, k->grad_shard);
        _vs_ddp_hfree(d, k->master);
        _vs_ddp_hfree(d, k->state[0]);
        _vs_ddp_hfree(d, k->state[1]);
    }
    for (int i = 0; i < d->npool && d->pool; i++) _vs_ddp_hfree(d, d->pool[i]);
    for (int i = 0; i < d->nzpool; i++) _vs_ddp_zpool_free(d, d->zpool[i]);
    vs_free(d->world, d->zpool);
    vs_free(d->world, d->zpool_owner);
    vs_free(d->world, d->zorder);
    vs_free(d->world, d->zheld);
    d->zpool = NULL, d->zpool_owner = NULL, d->zorder = NULL, d->zheld = NULL;
    d->nzpool = d->nzorder = d->capzorder = d->capzheld = 0;
    vs_free(d->world, d->pool);
    vs_free(d->world, d->pool_owner);
    vs_free(d->world, d->buckets);
    vs_free(d->world, d->order);
    _vs_ddp_hfree(d, d->scratch);
#ifdef _VS_DDP_CUDA
    _vs_ddp_cuda_free(d);
#endif
    // NULL everything: vs_ddp_free may run this again after a failed finalize
    d->pool = NULL;
    d->pool_owner = NULL;
    d->npool = 0;
    d->order = NULL;
    d->scratch = NULL;
    d->buckets = NULL;
    d->nbuckets = 0;
}

/* The range of bucket k this rank steps: all of it (ZeRO-0) or its 1/DP shard. */
_VS_DDP_PRIVATE void _vs_ddp_owned(const vs_ddp* d, const _vs_dbucket* k, int64_t* lo, int64_t* n)
{
    *lo = d->desc.zero == VS_ZERO_0 ? 0 : k->shard * d->dp_rank;
    *n = d->desc.zero == VS_ZERO_0 ? k->numel : k->shard;
}

/* [*a, *e): the part of parameter q (bucket indices) inside [lo, lo + n); 1
   when it is not empty. */
_VS_DDP_PRIVATE int _vs_ddp_meet(const _vs_dparam* q, int64_t lo, int64_t n, int64_t* a, int64_t* e)
{
    *a = q->offset > lo ? q->offset : lo;
    *e = q->offset + q->numel < lo + n ? q->offset + q->numel : lo + n;
    return *a < *e;
}

/* Element a (an index into bucket k, inside q) of q's value and of its
   gradient: in DDP's bucket buffers, or in the trainer's storage. */
_VS_DDP_PRIVATE void* _vs_ddp_pat(const _vs_dbucket* k, const _vs_dparam* q, int64_t a)
{
    if (q->pext) return (char*)q->pext + (size_t)(a - q->offset) * _vs_dsz(q->dtype);
    return (char*)k->param + (size_t)(a - k->pbase) * _vs_dsz(k->pdtype); // (ZeRO-3: a in the owned range)
}
_VS_DDP_PRIVATE void* _vs_ddp_gat(const _vs_dbucket* k, const _vs_dparam* q, int64_t a)
{
    if (q->gext && !k->staged) return (char*)q->gext + (size_t)(a - q->offset) * _vs_dsz(q->gdtype);
    return (char*)k->grad + (size_t)a * _vs_dsz(k->gdtype);
}

/* VESCALE_DEBUG=params on the host (vs_ddp_wait_params): while a bucket's
   all-gather is in flight, the pages that lie wholly inside its parameters'
   stale ranges are made inaccessible (mprotect), so a read before the wait
   faults; the handler names the parameter and the rank, then the fault kills
   the process as usual. A fault elsewhere goes to the handler that was
   installed before.

   The ranges live in one process-wide table (each DDP its own entries; a full
   table guards nothing more and says so once), which the handler reads without
   locks. Only pages wholly inside a range are guarded: the rest of the range
   (a parameter smaller than a page, or the ends of one that share a page with
   other data) is filled with NaN instead (all-ones bytes: NaN in f32, bf16 and
   f16), which the unpack overwrites. */
#define _VS_DDP_NGUARD 1024
typedef struct _vs_dguard {
    uintptr_t lo, hi; // hi 0: a free entry
    const void* owner;
    int rank;
    int released; // a released ZeRO-3 view (a gathered pool buffer given back), not a gather in flight
    char name[96];
} _vs_dguard;
static _vs_dguard _vs_ddp_guards[_VS_DDP_NGUARD];
static pthread_mutex_t _vs_ddp_guard_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction _vs_ddp_old_segv;
static int _vs_ddp_segv_on, _vs_ddp_guard_full;

_VS_DDP_PRIVATE void _vs_ddp_put(char* buf, size_t cap, size_t* n, const char* s)
{
    while (*s && *n + 1 < cap) buf[(*n)++] = *s++;
    buf[*n] = 0;
}

_VS_DDP_PRIVATE void _vs_ddp_segv(int sig, siginfo_t* si, void* uc)
{
    uintptr_t a = (uintptr_t)si->si_addr;
    for (int i = 0; i < _VS_DDP_NGUARD; i++) {
        uintptr_t hi = __atomic_load_n(&_vs_ddp_guards[i].hi, __ATOMIC_ACQUIRE);
        if (!hi || a < _vs_ddp_guards[i].lo || a >= hi) continue;
        char msg[400], num[16];
        size_t n = 0, k = 0;
        int rk = _vs_ddp_guards[i].rank;
        do num[k++] = (char)('0' + rk % 10), rk /= 10; while (rk && k < sizeof num);
        _vs_ddp_put(msg, sizeof msg, &n, "vescale: VESCALE_DEBUG=params: rank ");
        while (k) {
            char c[2] = {num[--k], 0};
            _vs_ddp_put(msg, sizeof msg, &n, c);
        }
        if (_vs_ddp_guards[i].released) {
            _vs_ddp_put(msg, sizeof msg, &n, " read a ZeRO-3 view of ");
            _vs_ddp_put(msg, sizeof msg, &n, _vs_ddp_guards[i].name);
            _vs_ddp_put(msg, sizeof msg, &n, " after vs_ddp_release: vs_ddp_gather the group before reading it (a "
                                             "view is valid until its release)\n");
        } else {
            _vs_ddp_put(msg, sizeof msg, &n, " read parameter '");
            _vs_ddp_put(msg, sizeof msg, &n, _vs_ddp_guards[i].name);
            _vs_ddp_put(msg, sizeof msg, &n, "' while its ZeRO all-gather was in flight: call vs_ddp_wait_params "
                                             "after vs_ddp_step before reading parameters\n");
        }
        if (write(2, msg, n) < 0) n = 0;
        signal(SIGSEGV, SIG_DFL); // the read faults again and ends the process
        return;
    }
    if (_vs_ddp_old_segv.sa_flags & SA_SIGINFO) {
        if (_vs_ddp_old_segv.sa_sigaction) _vs_ddp_old_segv.sa_sigaction(sig, si, uc);
        return;
    }
    if (_vs_ddp_old_segv.sa_handler == SIG_DFL || _vs_ddp_old_segv.sa_handler == SIG_IGN)
        signal(SIGSEGV, SIG_DFL);
    else
        _vs_ddp_old_segv.sa_handler(sig);
}

/* Makes the whole pages [a, b) of d inaccessible, named `name` in the fault's
   message (released: a ZeRO-3 view read after its release). */
_VS_DDP_PRIVATE void _vs_ddp_guard_pages(vs_ddp* d, uintptr_t a, uintptr_t b, const char* name, int released)
{
    pthread_mutex_lock(&_vs_ddp_guard_mu);
    if (!_vs_ddp_segv_on) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = _vs_ddp_segv;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        _vs_ddp_segv_on = sigaction(SIGSEGV, &sa, &_vs_ddp_old_segv) == 0;
    }
    int slot = -1;
    for (int i = 0; i < _VS_DDP_NGUARD && slot < 0; i++)
        if (!_vs_ddp_guards[i].hi) slot = i;
    if (slot >= 0 && mprotect((void*)a, b - a, PROT_NONE) == 0) {
        _vs_dguard* g = &_vs_ddp_guards[slot];
        g->lo = a, g->owner = d, g->rank = vs_world_rank(d->world), g->released = released;
        snprintf(g->name, sizeof g->name, "%s", name);
        __atomic_store_n(&g->hi, b, __ATOMIC_RELEASE);
    } else if (!_vs_ddp_guard_full) {
        _vs_ddp_guard_full = 1;
        vs_log(d->world, VS_LOG_WARN, "vs_ddp: VESCALE_DEBUG=params guards no more parameters (%s)",
               slot < 0 ? "its table is full" : "mprotect failed");
    }
    pthread_mutex_unlock(&_vs_ddp_guard_mu); // (a debugging aid: a range left unguarded is said once, not an error)
}

/* Lifts d's guard that starts at page a (none: nothing). */
_VS_DDP_PRIVATE void _vs_ddp_unguard_at(vs_ddp* d, uintptr_t a)
{
    pthread_mutex_lock(&_vs_ddp_guard_mu);
    for (int i = 0; i < _VS_DDP_NGUARD; i++) {
        _vs_dguard* g = &_vs_ddp_guards[i];
        if (!g->hi || g->owner != d || g->lo != a) continue;
        mprotect((void*)g->lo, g->hi - g->lo, PROT_READ | PROT_WRITE);
        __atomic_store_n(&g->hi, 0, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&_vs_ddp_guard_mu);
}

/* VESCALE_DEBUG=params, ZeRO-3 on a device, where no page can be made
   inaccessible with the runtime API alone (cuMemSetAccess is the driver's):
   - vs_ddp_release fills each buffer it gives back, on the trainer's stream,
     with a canary: each parameter's range a NaN of its own (f32: payload
     0xb << 18 | its index + 1; bf16 0x7fd5 and f16 0x7eab, too short to name
     one), the padding another. A read through a view kept past the release
     gets NaN, never the values of the group the buffer goes to next; where the
     NaN reaches a gradient unchanged (copies, host arithmetic; a GPU's
     arithmetic gives its canonical NaN instead), the non-finite gradient norm
     names the parameter (_vs_ddp_z3_nan_source).
   - When the pool hands the buffer out again, a kernel compares it with its
     canary and records the first parameter whose range changed: a write after
     the release. The next gradient norm reads the record beside its partial
     sums (no host wait more), summed over the ranks, and every rank refuses
     the step, the writer naming the parameter.
   A kept buffer (reshard_after_forward 0) keeps its values for the backward:
   no canary. */
#ifdef _VS_DDP_CUDA
#define _VS_DDP_CANARY 0x7fec0000u /* f32: a quiet NaN, bits 21..18 0xb, bits 17..0 the code */
/* Elements [a, e) of bucket k's gathered buffer buf: code's canary written, or compared (check). */
_VS_DDP_PRIVATE vs_result _vs_ddp_canary_range(const vs_ddp* d, const _vs_dbucket* k, void* buf, int64_t a, int64_t e,
                                               double code, int check)
{
    if (e <= a) return VS_OK;
    size_t pz = _vs_dsz(k->pdtype);
    int lo, hi; // halfwords, passed as int (the kernel vocabulary's argument kinds)
    if (pz == 4) {
        unsigned int w = _VS_DDP_CANARY | (code > 0 && code <= 0x3ffff ? (unsigned int)code : 0u);
        lo = (int)(w & 0xffffu), hi = (int)(w >> 16); // (little-endian halves)
    } else {
        lo = hi = k->pdtype == VS_BF16 ? 0x7fd5 : 0x7eab;
    }
    unsigned short* p = (unsigned short*)((char*)buf + (size_t)a * pz);
    long long n = (long long)((size_t)(e - a) * pz / 2);
    double* rec = d->cu->drec;
    void* fill[] = {&p, &n, &lo, &hi};
    void* cmp[] = {&p, &n, &lo, &hi, &rec, &code};
    return _vs_ddp_kernel(d, check ? _VS_KI_CANARY_CHECK : _VS_KI_CANARY, n, check ? cmp : fill);
}

/* Bucket b's canary in buf, written or compared: each parameter's range coded
   by its index + 1, the padding by nparams + 1 + b (all > 0: the ranks' records
   are summed). */
_VS_DDP_PRIVATE vs_result _vs_ddp_canary(const vs_ddp* d, int b, void* buf, int check)
{
    const _vs_dbucket* k = &d->buckets[b];
    int64_t at = 0;
    vs_result r = VS_OK;
    for (int j = k->first; j <= k->last && !r; j++) {
        const _vs_dparam* q = j < k->last ? &d->params[d->order[j]] : NULL;
        int64_t lo = q ? q->offset : k->numel;
        if (lo > at) r = _vs_ddp_canary_range(d, k, buf, at, lo, 1.0 + d->nparams + b, check);
        if (q && !r) r = _vs_ddp_canary_range(d, k, buf, q->offset, q->offset + q->numel, 1.0 + d->order[j], check);
        if (q && q->offset + q->numel > at) at = q->offset + q->numel;
    }
    return r;
}

/* Pool buffer buf's entry in the list of those seen (added: -1, or NULL out of memory). */
_VS_DDP_PRIVATE int* _vs_ddp_canary_of(vs_ddp* d, void* buf)
{
    _vs_dcuda* cu = d->cu;
    for (int i = 0; i < cu->ncbuf; i++)
        if (cu->cbuf[i] == buf) return &cu->cbucket[i];
    if (cu->ncbuf == cu->capcbuf) { // (grows with the pool: its first step)
        int cap = cu->capcbuf ? 2 * cu->capcbuf : 8;
        void** nb = _VS_DDP_NEW(d->world, void*, cap);
        int* nk = _VS_DDP_NEW(d->world, int, cap);
        if (!nb || !nk) {
            vs_free(d->world, nb);
            vs_free(d->world, nk);
            return NULL;
        }
        for (int i = 0; i < cu->ncbuf; i++) nb[i] = cu->cbuf[i], nk[i] = cu->cbucket[i];
        vs_free(d->world, cu->cbuf);
        vs_free(d->world, cu->cbucket);
        cu->cbuf = nb, cu->cbucket = nk, cu->capcbuf = cap;
    }
    cu->cbuf[cu->ncbuf] = buf;
    cu->cbucket[cu->ncbuf] = -1;
    return &cu->cbucket[cu->ncbuf++];
}
#endif

/* VESCALE_DEBUG=params: the gathered pool hands buf to bucket b. Host: its
   pages accessible again (the gather writes them); device: a canary in it
   compared (a write since its release recorded). */
_VS_DDP_PRIVATE vs_result _vs_ddp_z3_debug_take(vs_ddp* d, int b, void* buf)
{
    if (!d->dev) {
        _vs_ddp_unguard_at(d, (uintptr_t)buf);
        return VS_OK;
    }
#ifdef _VS_DDP_CUDA
    if (!d->cu || !d->cu->drec) return VS_OK;
    int* c = _vs_ddp_canary_of(d, buf);
    if (!c) return vs_set_error(VS_ERR_NOMEM, "vs_ddp: out of memory (VESCALE_DEBUG=params' list of buffers)");
    vs_result r = *c <= -2 ? _vs_ddp_canary(d, -2 - *c, buf, 1) : VS_OK;
    *c = b;
    return r;
#else
    (void)b;
    return VS_OK;
#endif
}

/* VESCALE_DEBUG=params on a device, after vs_ddp_release(d, group): the buffers
   its buckets gave back (not a kept one) get their canaries. */
_VS_DDP_PRIVATE vs_result _vs_ddp_z3_debug_release(vs_ddp* d, int group)
{
    vs_result r = VS_OK;
#ifdef _VS_DDP_CUDA
    for (int i = 0; d->cu && i < d->cu->ncbuf && !r; i++) {
        int b = d->cu->cbucket[i];
        if (b < 0 || d->buckets[b].rgroup != group || d->buckets[b].zbuf == d->cu->cbuf[i]) continue;
        r = _vs_ddp_canary(d, b, d->cu->cbuf[i], 0);
        d->cu->cbucket[i] = -2 - b;
    }
#else
    (void)d, (void)group;
#endif
    return r ? vs_set_error(r, "vs_ddp_release: VESCALE_DEBUG=params: %s", vs_last_error()) : VS_OK;
}

/* Guards the pages wholly inside [lo, hi) for parameter q of d, and fills the
   rest of the range with NaN. */
_VS_DDP_PRIVATE vs_result _vs_ddp_guard_range(vs_ddp* d, _vs_dparam* q, char* lo, char* hi)
{
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)lo + pg - 1) / pg * pg, b = (uintptr_t)hi / pg * pg;
    if (a >= b) a = b = (uintptr_t)hi; // no whole page: all of it is poisoned
    if ((uintptr_t)lo < a) memset(lo, 0xff, (size_t)(a - (uintptr_t)lo));
    if (b < (uintptr_t)hi) memset((void*)b, 0xff, (size_t)((uintptr_t)hi - b));
    if ((uintptr_t)lo < a || b < (uintptr_t)hi) q->poisoned = 1;
    if (a < b) _vs_ddp_guard_pages(d, a, b, q->name, 0);
    return VS_OK;
}

/* f on each stale byte range of bucket k: its parameters' parts outside this
   rank's owned range, which a ZeRO all-gather brings. */
typedef vs_result (*_vs_dstale_fn)(vs_ddp* d, _vs_dparam* q, char* lo, char* hi);
_VS_DDP_PRIVATE vs_result _vs_ddp_each_stale(vs_ddp* d, _vs_dbucket* k, _vs_dstale_fn f)
{
    int64_t lo, n;
    _vs_ddp_owned(d, k, &lo, &n);
    size_t pz = _vs_dsz(k->pdtype);
    vs_result r = VS_OK;
    for (int j = k->first; j < k->last && !r; j++) {
        _vs_dparam* q = &d->params[d->order[j]];
        int64_t s = q->offset, e = q->offset + q->numel, e1 = e < lo ? e : lo, a2 = s > lo + n ? s : lo + n;
        char* base = (char*)_vs_ddp_pat(k, q, s);
        if (s < e1) r = f(d, q, base, base + (size_t)(e1 - s) * pz);
        if (a2 < e && !r) r = f(d, q, base + (size_t)(a2 - s) * pz, base + (size_t)(e - s) * pz);
    }
    return r;
}

/* Lifts bucket k's guards: d's ranges inside k's parameters. */
_VS_DDP_PRIVATE void _vs_ddp_unguard(vs_ddp* d, _vs_dbucket* k)
{
    if (!k->guarded) return;
    pthread_mutex_lock(&_vs_ddp_guard_mu);
    for (int i = 0; i < _VS_DDP_NGUARD; i++) {
        _vs_dguard* g = &_vs_ddp_guards[i];
        if (!g->hi || g->owner != d) continue;
        int mine = 0; // a range inside one of k's parameters
        for (int j = k->first; j < k->last && !mine; j++) {
            const _vs_dparam* q = &d->params[d->order[j]];
            uintptr_t a = (uintptr_t)_vs_ddp_pat(k, q, q->offset);
            mine = g->lo >= a && g->lo < a + (uintptr_t)q->numel * _vs_dsz(q->dtype);
        }
        if (!mine) continue;
        mprotect((void*)g->lo, g->hi - g->lo, PROT_READ | PROT_WRITE);
        __atomic_store_n(&g->hi, 0, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&_vs_ddp_guard_mu);
    k->guarded = 0;
}

/* A bucket's all-gather goes through a staging buffer (written into the
   parameters when waited for): trainer-owned storage with vs_ddp_desc.staged,
   and every bucket on the host under VESCALE_DEBUG=params (their pages are
   guarded meanwhile, so the gather must not write them). Else it lands in
   place: DDP's contiguous bucket, or the trainer's pieces (_vs_ddp_gather_grouped). */
_VS_DDP_PRIVATE int _vs_ddp_staged_gather(const vs_ddp* d, const _vs_dbucket* k)
{
    return (k->ext && d->desc.staged) || (d->debug_params && !d->dev);
}

// (finalize, the backward pass, clipping, the optimizer step, queries, free)

/* The order buckets reduce in (d->order: parameter indices, the first bucket's first): backward
   produces the last registered first, so reverse registration order, except that the members of a
   nonzero ready_group stand together where the group was first registered (a kind's tensors for
   every layer registered one kind after another still make a bucket a layer, in the backward's
   order). Two sorts of the n parameters at finalize. */
typedef struct _vs_dorder { int key, index; } _vs_dorder;
_VS_DDP_PRIVATE int _vs_ddp_by_group(const void* a, const void* b) // (group, index) ascending
{
    const _vs_dorder *x = (const _vs_dorder*)a, *y = (const _vs_dorder*)b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}
_VS_DDP_PRIVATE int _vs_ddp_by_key_desc(const void* a, const void* b) // (key, index) descending
{
    return _vs_ddp_by_group(b, a);
}
_VS_DDP_PRIVATE vs_result _vs_ddp_bucket_order(vs_ddp* d)
{
    int n = d->nparams;
    _vs_dorder* t = _VS_DDP_NEW(d->world, _vs_dorder, n);
    if (!t) return vs_set_error(VS_ERR_NOMEM, "vs_ddp_finalize: out of memory");
    for (int i = 0; i < n; i++) t[i].key = d->params[i].rgroup, t[i].index = i;
    qsort(t, (size_t)n, sizeof *t, _vs_ddp_by_group);
    for (int i = 0, first = 0; i < n; i++) { // key: the group's first registration (a group of its own: itself)
        if (i == 0 || t[i].key != t[i - 1].key) first = t[i].index;
        d->order[t[i].index] = t[i].key ? first : t[i].index; // (d->order as scratch: the key of each)
    }
    for (int i = 0; i < n; i++) t[i].key = d->order[i], t[i].index = i;
    qsort(t, (size_t)n, sizeof *t, _vs_ddp_by_key_desc);
    for (int i = 0; i < n; i++) d->order[i] = t[i].index;
    vs_free(d->world, t);
    return VS_OK;
}

/* The DP group setup's second half (the first: _vs_ddp_dims), collective
   over the mesh: the DP group (HSDP: the shard group, where ZeRO shards and
   parameters are all-gathered), HSDP's replicate group (the owned ranges'
   all-reduce) and replicate x shard (ZeRO-0's all-reduce), and every other
   dim's group, made now while every rank is here. */
_VS_DDP_PRIVATE vs_result _vs_ddp_groups(vs_ddp* d)
{
    vs_result r = vs_mesh_submesh(d->mesh, vs_mesh_dim_name(d->mesh, d->dp_index), &d->dp);
    for (int k = 0; k < vs_mesh_ndims(d->mesh) && !r; k++) {
        vs_mesh* sub;
        if (k != d->dp_index) r = vs_mesh_submesh(d->mesh, vs_mesh_dim_name(d->mesh, k), k == d->dpr_index ? &d->dpr : &sub);
    }
    if (r || d->dpr_index < 0) return r;
    char both[2 * VS_MESH_NAME_MAX + 2];
    snprintf(both, sizeof both, "%s,%s", vs_mesh_dim_name(d->mesh, d->dpr_index), vs_mesh_dim_name(d->mesh, d->dp_index));
    return vs_mesh_submesh(d->mesh, both, &d->dp_both); // (replicate-major: the world's rank order on a DPR x DPS mesh)
}

_VS_DDP_PRIVATE vs_result _vs_ddp_zpool_reserve(vs_ddp* d);

/* The most buckets of one ready group (dtypes or partial dims split a group). */
_VS_DDP_PRIVATE int _vs_ddp_group_buckets(const vs_ddp* d)
{
    int per = 1;
    for (int b = 0; b < d->nbuckets; b++) {
        int n = 0;
        for (int c = 0; c < d->nbuckets && d->buckets[b].rgroup; c++) n += d->buckets[c].rgroup == d->buckets[b].rgroup;
        if (n > per) per = n;
    }
    return per;
}

VS_API vs_result vs_ddp_finalize(vs_ddp* d)
{
    const char* fn = "vs_ddp_finalize";
    if (!d) return vs_set_error(VS_ERR_NULL, "%s: ddp is NULL", fn);
    if (d->finalized) return vs_set_error(VS_ERR_STATE, "%s: called twice", fn);
    vs_result r = _vs_ddp_groups(d);
    if (r) return r;
    // the ranks that must hold the same parameters: every dim but the pipeline's
    // (a rank with none registered takes part too, so its peers learn it)
    char dims[VS_MESH_MAX_DIMS * 64] = "";
    vs_mesh* chk = d->mesh;
    for (int k = 0; k < vs_mesh_ndims(d->mesh); k++)
        if (k != d->pp_index)
            snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%s", dims[0] ? "," : "",
                     vs_mesh_dim_name(d->mesh, k));
    if (d->pp_index >= 0 && (r = vs_mesh_submesh(d->mesh, dims, &chk))) return r;
    if ((r = _vs_ddp_agree(d, chk, dims))) return r;
    if (d->nparams == 0) return vs_set_error(VS_ERR_STATE, "%s: no parameters registered", fn);
    d->dp_size = vs_mesh_nranks(d->dp);
    d->dp_rank = vs_mesh_rank(d->dp);
    d->solo = d->dp_size == 1 && (!d->dpr || vs_mesh_nranks(d->dpr) == 1);
    int n = d->nparams;
    d->order = _VS_DDP_NEW(d->world, int, n);
    d->buckets = _VS_DDP_NEW(d->world, _vs_dbucket, n);
    if (!d->order || !d->buckets) goto nomem;
    if ((r = _vs_ddp_bucket_order(d))) goto fail;
    // buckets: consecutive parameters in bucket order with the same dtypes and
    // partial dims, up to bucket_bytes
    for (int i = 0; i < n;) {
        _vs_dparam* q0 = &d->params[d->order[i]];
        _vs_dbucket* k = &d->buckets[d->nbuckets];
        k->pdtype = q0->dtype;
        k->gdtype = q0->gdtype;
        k->partial_mask = _vs_ddp_partial_mask(d, q0);
        k->ext = q0->pext != NULL;
        k->rgroup = q0->rgroup;
        k->first = i;
        int64_t elems = 0;
        size_t gsz = _vs_dsz(k->gdtype);
        while (i < n) {
            _vs_dparam* q = &d->params[d->order[i]];
            if (q->dtype != k->pdtype || q->gdtype != k->gdtype || _vs_ddp_partial_mask(d, q) != k->partial_mask ||
                (q->pext != NULL) != k->ext || q->rgroup != k->rgroup)
                break;
            // (elems + numel) * gsz > bucket_bytes, without overflow (a ready
            // group is one bucket whatever its size); and a bucket never holds
            // more than one parameter may (its sizes fit in 64 bits)
            if (elems > 0 && ((!k->rgroup && q->numel > d->desc.bucket_bytes / (int64_t)gsz - elems) ||
                              q->numel > _VS_DDP_MAX_NUMEL - elems))
                break;
            q->bucket = d->nbuckets;
            q->offset = elems;
            q->counted = _vs_ddp_counted(d, q);
            elems += q->numel;
            i++;
        }
        k->last = i;
        int64_t align = 16 * (int64_t)d->dp_size; // equal, 64-byte aligned ranges
        k->numel = (elems + align - 1) / align * align;
        k->shard = k->numel / d->dp_size;
        if (k->numel > d->max_bucket) d->max_bucket = k->numel;
        if ((size_t)k->numel * gsz > d->max_grad_bytes) d->max_grad_bytes = (size_t)k->numel * gsz;
        // the staging pool's buffer: ZeRO-2's gradients, a trainer-owned bucket's
        // gradients and all-gather, an all-gather staged for VESCALE_DEBUG=params
        size_t pbytes = (size_t)k->numel * _vs_dsz(k->pdtype);
        if (d->desc.zero >= VS_ZERO_2) d->pool_bytes = d->max_grad_bytes > d->pool_bytes ? d->max_grad_bytes : d->pool_bytes;
        if (d->desc.zero == VS_ZERO_3 && pbytes > d->zpool_bytes) d->zpool_bytes = pbytes; // (the gathered pool's size)
        k->grouped = k->ext && !d->desc.staged && d->desc.zero != VS_ZERO_2 && !k->partial_mask;
        if (k->ext && !k->grouped && (size_t)k->numel * gsz > d->pool_bytes) d->pool_bytes = (size_t)k->numel * gsz;
        if (_vs_ddp_staged_gather(d, k) && d->desc.zero != VS_ZERO_0 && d->desc.zero != VS_ZERO_3 && pbytes > d->pool_bytes)
            d->pool_bytes = pbytes;
        d->nbuckets++;
    }
#ifdef _VS_DDP_CUDA
    if (d->dev && (r = _vs_ddp_cuda_init(d))) goto fail;
#endif
    // (f32 conversions of an owned range; ZeRO-3 keeps nothing bucket-sized at rest)
    d->scratch = (float*)_vs_ddp_zalloc(d, sizeof(float) * (size_t)(d->max_bucket / (d->desc.zero == VS_ZERO_3 ? d->dp_size : 1)));
    if (!d->scratch) goto nomem;
    for (int b = 0; b < d->nbuckets; b++) {
        _vs_dbucket* k = &d->buckets[b];
        size_t pz = _vs_dsz(k->pdtype), gz = _vs_dsz(k->gdtype);
        int64_t first, own;
        _vs_ddp_owned(d, k, &first, &own);
        int z3 = d->desc.zero == VS_ZERO_3;
        k->pbase = z3 ? first : 0;
        if (!k->ext && !(k->param = _vs_ddp_zalloc(d, (size_t)(z3 ? own : k->numel) * pz))) goto nomem;
        // an accumulator for the reduced owned range: ZeRO-1/2, and ZeRO-0 buckets
        // that are also summed over TP (their buffer cannot take a second pass)
        k->acc = d->desc.zero != VS_ZERO_0 || k->partial_mask != 0;
        k->consume = k->ext && k->acc;
        k->acc_used = d->desc.zero >= VS_ZERO_2 || k->consume;
        if (k->acc && !(k->grad_shard = (float*)_vs_ddp_zalloc(d, sizeof(float) * (size_t)own))) goto nomem;
        if (d->desc.zero < VS_ZERO_2 && !k->ext && !(k->grad = _vs_ddp_zalloc(d, (size_t)k->numel * gz))) goto nomem;
        if (k->pdtype != VS_F32 && !(k->master = (float*)_vs_ddp_zalloc(d, sizeof(float) * (size_t)own))) goto nomem;
        int nstate = d->desc.optim.kind == VS_OPTIM_SGD ? (d->desc.optim.momentum != 0) : 2;
        for (int s = 0; s < nstate; s++)
            if (!(k->state[s] = (float*)_vs_ddp_zalloc(d, sizeof(float) * (size_t)own))) goto nomem;
        for (int j = k->first; j < k->last && !r && !k->ext; j++) { // (ZeRO-3: the owned part only)
            _vs_dparam* q = &d->params[d->order[j]];
            int64_t a = q->offset, e = q->offset + q->numel;
            if (q->init && (!z3 || _vs_ddp_meet(q, first, own, &a, &e)))
                r = _vs_ddp_copy(d, _vs_ddp_pat(k, q, a), (char*)q->init + (size_t)(a - q->offset) * pz, (size_t)(e - a) * pz);
        }
        if (k->master && !r && !k->ext) r = _vs_ddp_to_f32(d, k->master, (char*)k->param + (size_t)(first - k->pbase) * pz, k->pdtype, own);
        k->reshard = d->desc.reshard_after_forward;
        for (int j = k->first; j < k->last; j++)
            if (d->params[d->order[j]].reshard >= 0) k->reshard = d->params[d->order[j]].reshard;
        for (int j = k->first; j < k->last && !r && k->ext && k->master; j++) { // the owned parts of the trainer's values
            _vs_dparam* q = &d->params[d->order[j]];
            int64_t a, e;
            if (_vs_ddp_meet(q, first, own, &a, &e))
                r = _vs_ddp_to_f32(d, k->master + (a - first), _vs_ddp_pat(k, q, a), k->pdtype, e - a);
        }
        if (r) goto fail;
    }
    if ((r = _vs_ddp_zpool_reserve(d))) goto fail;
    if (d->pool_bytes) {
        d->npool = d->desc.zero2_buffers;
        // (one a bucket at most: a bucket holds one at a time; a caller sizing for the worst case,
        // vs_parallelize's layers x their parameters, would otherwise get that many buffers)
        if (d->desc.zero != VS_ZERO_3 && d->npool > d->nbuckets) d->npool = d->nbuckets > 0 ? d->nbuckets : 1;
        // ZeRO-3: a group's gradients all at once, and the last group's still reducing; accumulating
        // without sync (vs_ddp_set_sync 0): every bucket's full gradients
        if (d->desc.zero == VS_ZERO_3 && d->npool < 2 * _vs_ddp_group_buckets(d)) d->npool = 2 * _vs_ddp_group_buckets(d);
        if (d->desc.zero == VS_ZERO_3 && !d->sync && d->npool < d->nbuckets) d->npool = d->nbuckets;
        d->pool = _VS_DDP_NEW(d->world, void*, d->npool);
        d->pool_owner = _VS_DDP_NEW(d->world, int, d->npool);
        if (!d->pool || !d->pool_owner) goto nomem;
        for (int i = 0; i < d->npool; i++) {
            d->pool_owner[i] = -1;
            if (!(d->pool[i] = _vs_ddp_zalloc(d, d->pool_bytes))) goto nomem;
        }
    }
    if ((r = _vs_ddp_sync(d))) goto fail; // the initial values are in place: drop the copies
    for (int i = 0; i < n; i++) {
        vs_free(d->world, d->params[i].init);
        d->params[i].init = NULL;
    }
    d->finalized = 1;
    return VS_OK;
nomem:
    vs_set_error(VS_ERR_NOMEM, "%s: out of memory for %d parameters", fn, n);
    r = VS_ERR_NOMEM;
fail:
    _vs_ddp_release(d);
    return r;
}

VS_API int vs_ddp_num_params(const vs_ddp* d)
{
    return d ? d->nparams : vs_set_error(VS_ERR_NULL, "vs_ddp_num_params: ddp is NULL");
}

_VS_DDP_PRIVATE vs_result _vs_ddp_check_index(const char* fn, const vs_ddp* d, int i)
{
    if (!d) return vs_set_error(VS_ERR_NULL, "%s: ddp is NULL", fn);
    if (!d->finalized) return vs_set_error(VS_ERR_STATE, "%s: call vs_ddp_finalize first", fn);
    if (i < 0 || i >= d->nparams)
        return vs_set_error(VS_ERR_INVALID, "%s: parameter index %d out of range [0, %d)", fn, i, d->nparams);
    return VS_OK;
}

/* Completes w for what comes next: on a device, in stream order (the trainer's
   stream waits for it, the host does not: the one host wait of a step is the
   trainer's, e.g. its loss, and the mesh's watchdog gives the work its
   deadline); on the host transports, vs_wait. */
_VS_DDP_PRIVATE vs_result _vs_ddp_done(const vs_ddp* d, vs_work* w)
{
#ifdef _VS_DDP_CUDA
    if (d->cu) return vs_wait_stream(w, d->cu->stream ? (void*)d->cu->stream : (void*)cudaStreamLegacy);
#else
    (void)d;
#endif
    return vs_wait(w);
}

/* The staging buffer `owner` holds (b: bucket b's gradients; -2 - b: its
   all-gather) back to the pool. */
_VS_DDP_PRIVATE void _vs_ddp_pool_give(vs_ddp* d, int owner)
{
    for (int i = 0; i < d->npool; i++)
        if (d->pool_owner[i] == owner) d->pool_owner[i] = -1;
}

/* Bucket b's parameter all-gather, if one is in flight, before what comes
   next; a staged one is then written into the parameters (device: in stream
   order) and its buffer goes back to the pool. */
_VS_DDP_PRIVATE vs_result _vs_ddp_params_ready(vs_ddp* d, int b)
{
    _vs_dbucket* k = &d->buckets[b];
    vs_result r = VS_OK;
    if (k->pwork) {
        r = _vs_ddp_done(d, k->pwork);
        k->pwork = NULL;
    }
    if (r || !k->gbuf) return r;
    _vs_ddp_unguard(d, k);
    size_t pz = _vs_dsz(k->pdtype);
    for (int j = k->first; j < k->last && !r; j++) {
        _vs_dparam* q = &d->params[d->order[j]];
        r = _vs_ddp_copy(d, _vs_ddp_pat(k, q, q->offset), (char*)k->gbuf + (size_t)q->offset * pz, (size_t)q->numel * pz);
        q->poisoned = 0; // (the NaN of VESCALE_DEBUG=params overwritten)
    }
    _vs_ddp_pool_give(d, -2 - b);
    k->gbuf = NULL;
    return r;
}

VS_API vs_result vs_ddp_wait_params(vs_ddp* d)
{
    if (!d) return vs_set_error(VS_ERR_NULL, "vs_ddp_wait_params: ddp is NULL");
    vs_result r = VS_OK;
    for (int b = d->nbuckets - 1; b >= 0 && !r; b--) r = _vs_ddp_params_ready(d, b); // (the first layers first)
    return r ? vs_set_error(r, "vs_ddp_wait_params: %s", vs_last_error()) : VS_OK;
}

/* ZeRO-3: the gathered pool, the gathers and the groups' states (the rules at
   vs_ddp_gather). A group's buckets are those with rgroup == group; each goes
   REST -> FLIGHT (gather issued) -> HELD (vs_ddp_gather) -> KEPT or REST
   (vs_ddp_release) -> ... The collectives go through _vs_ddp_z3_all_gather
   only (and the reduce-scatter of _vs_ddp_launch), so another DP layout
   (HSDP) changes them in one place. */

/* VESCALE_DEBUG=params on the host: the gathered pool's buffers are whole
   pages, made inaccessible while given back, so a view read after its release
   faults naming the group (_vs_ddp_segv). The allocation's start is kept
   before the first page. */
_VS_DDP_PRIVATE int _vs_ddp_zguarded(const vs_ddp* d) { return d->debug_params && !d->dev; }
_VS_DDP_PRIVATE size_t _vs_ddp_zpages(const vs_ddp* d)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return (d->zpool_bytes + pg - 1) / pg * pg;
}
_VS_DDP_PRIVATE void* _vs_ddp_zpool_alloc(const vs_ddp* d)
{
    if (!_vs_ddp_zguarded(d)) return _vs_ddp_zalloc(d, d->zpool_bytes);
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    char* raw = (char*)vs_alloc(d->world, _vs_ddp_zpages(d) + 2 * pg);
    if (!raw) return NULL;
    char* a = (char*)(((uintptr_t)raw + sizeof(void*) + pg - 1) / pg * pg);
    memcpy(a - sizeof(void*), &raw, sizeof raw);
    memset(a, 0, _vs_ddp_zpages(d));
    return a;
}
_VS_DDP_PRIVATE void _vs_ddp_zpool_free(vs_ddp* d, void* p)
{
    if (!_vs_ddp_zguarded(d)) {
        _vs_ddp_hfree(d, p);
        return;
    }
    void* raw;
    _vs_ddp_unguard_at(d, (uintptr_t)p);
    memcpy(&raw, (char*)p - sizeof(void*), sizeof raw);
    vs_free(d->world, raw);
}

/* The gathered pool grown to n buffers, the new ones free (one on each
   failure to grow it: those made are kept). */
_VS_DDP_PRIVATE vs_result _vs_ddp_zpool_grow(vs_ddp* d, int n)
{
    if (n <= d->nzpool) return VS_OK;
    void** np = _VS_DDP_NEW(d->world, void*, n);
    int* no = _VS_DDP_NEW(d->world, int, n);
    if (!np || !no) {
        vs_free(d->world, np);
        vs_free(d->world, no);
        return vs_set_error(VS_ERR_NOMEM, "vs_ddp: out of memory for the gathered pool's list of %d buffers", n);
    }
    for (int i = 0; i < d->nzpool; i++) np[i] = d->zpool[i], no[i] = d->zpool_owner[i];
    vs_free(d->world, d->zpool);
    vs_free(d->world, d->zpool_owner);
    d->zpool = np, d->zpool_owner = no;
    while (d->nzpool < n) {
        void* nb = _vs_ddp_zpool_alloc(d);
        if (!nb)
            return vs_set_error(VS_ERR_NOMEM, "vs_ddp: out of memory for gathered buffer %d (%zu bytes)", d->nzpool + 1,
                                d->zpool_bytes);
        np[d->nzpool] = nb, no[d->nzpool++] = -1;
    }
    return VS_OK;
}

/* A free buffer of the gathered pool for bucket b; none free: one more (the
   pool grows to the most buckets gathered at once, which the first step shows). */
_VS_DDP_PRIVATE vs_result _vs_ddp_zpool_take(vs_ddp* d, int b, void** buf)
{
    for (int i = 0;; i++) {
        if (i == d->nzpool) {
            /* (device: cudaMalloc synchronizes the device, so this rank's gathers in flight finish first,
               on the host with a deadline, not inside the allocation while they wait for their peers) */
            vs_result r = d->cu ? vs_ddp_synchronize(d) : VS_OK;
            if (!r) r = _vs_ddp_zpool_grow(d, d->nzpool + 1);
            if (r) return r;
        }
        if (d->zpool_owner[i] >= 0) continue;
        d->zpool_owner[i] = b;
        *buf = d->zpool[i];
        return d->debug_params ? _vs_ddp_z3_debug_take(d, b, *buf) : VS_OK; // (the gather writes it)
    }
}

/* Bucket b's gathered buffer back to the pool (its gather completed). */
_VS_DDP_PRIVATE void _vs_ddp_z3_free(vs_ddp* d, int b)
{
    _vs_dbucket* k = &d->buckets[b];
    if (_vs_ddp_zguarded(d) && k->zbuf) {
        char name[96];
        snprintf(name, sizeof name, "ready group %d ('%.60s'%s)", k->rgroup, d->params[d->order[k->first]].name,
                 k->last - k->first > 1 ? ", ..." : "");
        _vs_ddp_guard_pages(d, (uintptr_t)k->zbuf, (uintptr_t)k->zbuf + _vs_ddp_zpages(d), name, 1);
    }
    for (int i = 0; i < d->nzpool; i++)
        if (d->zpool_owner[i] == b) d->zpool_owner[i] = -1;
    d->buckets[b].zbuf = NULL;
    d->buckets[b].zstate = _VS_Z3_REST;
    d->buckets[b].zrest = d->nzorder;
}

/* Bucket b's gathered copy dropped (stale, or about to be): its gather in
   flight completes first, as the buffer is reused next, then the buffer goes
   back to the pool (also when the wait failed: nothing is left to keep). */
_VS_DDP_PRIVATE vs_result _vs_ddp_z3_drop(vs_ddp* d, int b)
{
    vs_result r = _vs_ddp_params_ready(d, b);
    _vs_ddp_z3_free(d, b);
    return r;
}

/* The first step's gather of group g, recorded at position j (before its
   gathers are issued): zheld[j] = the buckets gathered (held, kept or in
   flight) right after it, as later steps will have them, whose prefetch adds
   the groups ahead: g's buckets at rest now are prefetched in a later step at
   each of the `prefetch` gathers before j at which they are at rest already
   (from zrest on, the gathers recorded when they went back), so they count
   there too. The pool is only held between gathers, so its most is at one. */
_VS_DDP_PRIVATE vs_result _vs_ddp_zpool_note(vs_ddp* d, int g)
{
    int j = d->nzorder - 1, busy = 0, mine = 0, from = 0;
    if (j >= d->capzheld) {
        int cap = d->capzorder > j ? d->capzorder : j + 1;
        int* nh = _VS_DDP_NEW(d->world, int, cap);
        if (!nh) return vs_set_error(VS_ERR_NOMEM, "vs_ddp_gather: out of memory recording the gather order");
        for (int i = 0; i < j; i++) nh[i] = d->zheld[i];
        vs_free(d->world, d->zheld);
        d->zheld = nh, d->capzheld = cap;
    }
    for (int b = 0; b < d->nbuckets; b++) {
        const _vs_dbucket* k = &d->buckets[b];
        if (k->zstate != _VS_Z3_REST) {
            busy++;
        } else if (k->rgroup == g) {
            mine++;
            from = k->zrest > from ? k->zrest : from;
        }
    }
    d->zheld[j] = busy + mine;
    for (int i = j - d->desc.prefetch > from ? j - d->desc.prefetch : from; i < j; i++) d->zheld[i] += mine;
    return VS_OK;
}

/* At the end of the first step (vs_ddp_step, its gathers completed, the
   groups given back): the gathered pool grows to the most buckets a later
   step holds at once (zheld), so a steady step allocates nothing, beside a
   collective or not. On a device the DDP's work in flight (the gradients'
   reduce-scatters) completes first: cudaMalloc synchronizes the device, which
   must not happen beside a collective still waiting for its peers. This once
   only; a trainer whose pattern changes later grows it at its gather
   (_vs_ddp_zpool_take), after the same wait. */
_VS_DDP_PRIVATE vs_result _vs_ddp_zpool_size(vs_ddp* d)
{
    if (d->desc.zero != VS_ZERO_3 || d->zrecorded || !d->zheld) return VS_OK;
    int want = 0;
    for (int i = 0; i < d->nzorder && i < d->capzheld; i++) want = d->zheld[i] > want ? d->zheld[i] : want;
    vs_free(d->world, d->zheld);
    d->zheld = NULL, d->capzheld = 0;
    if (want > d->nbuckets) want = d->nbuckets;
    vs_result r = VS_OK;
    if (want > d->nzpool && d->cu) r = vs_ddp_synchronize(d);
    if (!r) r = _vs_ddp_zpool_grow(d, want);
    return r ? vs_set_error(r, "vs_ddp_step: the gathered pool (%d buffers of %zu bytes, the first step's most held at "
                            "once): %s", want, d->zpool_bytes, vs_last_error()) : VS_OK;
}

/* The all-gather of bucket k's owned ranges into k->zbuf over the DP group,
   after the trainer's stream (the step wrote the owned range; earlier reads
   of the buffer's last contents come first too). */
_VS_DDP_PRIVATE vs_result _vs_ddp_z3_all_gather(vs_ddp* d, _vs_dbucket* k, vs_work** wp)
{
    vs_comm* c = vs_mesh_comm(d->dp);
    vs_result r = _vs_ddp_fence(d, c);
    if (!r) r = vs_all_gather(c, k->param, k->zbuf, (size_t)k->shard, k->pdtype, wp);
    return r;
}

/* Issues the gathers of group g's buckets at rest (asynchronous). */
_VS_DDP_PRIVATE vs_result _vs_ddp_z3_issue(vs_ddp* d, int g)
{
    vs_result r = VS_OK;
    for (int b = 0; b < d->nbuckets && !r; b++) {
        _vs_dbucket* k = &d->buckets[b];
        if (k->rgroup != g || k->zstate != _VS_Z3_REST) continue;
        if ((r = _vs_ddp_zpool_take(d, b, &k->zbuf))) break;
        k->zstate = _VS_Z3_FLIGHT;
        if ((r = _vs_ddp_z3_all_gather(d, k, &k->pwork))) _vs_ddp_z3_free(d, b);
    }
    return r;
}

/* The `prefetch` groups of the recorded order from position `from` on; the
   group being gathered (cur, 0: none) takes no place in the window: held, its
   next entry (the last forward group's backward) needs no gather. */
_VS_DDP_PRIVATE vs_result _vs_ddp_z3_prefetch(vs_ddp* d, int from, int cur)
{
    vs_result r = VS_OK;
    for (int i = from, n = 0; i < d->nzorder && n < d->desc.prefetch && !r; i++)
        if (d->zorder[i] != cur) r = _vs_ddp_z3_issue(d, d->zorder[i]), n++;
    return r;
}

/* A release of group g keeps its buffer when the recorded order's next gather
   is g's own (the forward's last group, gathered again at once for its
   backward, as FSDP2 keeps its root module; between micro-batches, the
   backward's last group is the next forward's first): that gather then needs
   no traffic, and the memory is what it would take anyway. */
_VS_DDP_PRIVATE int _vs_ddp_z3_keeps(const vs_ddp* d, int g)
{
    return d->zrecorded && d->zpos < d->nzorder && d->zorder[d->zpos] == g;
}

/* Drops the buffers kept for a next gather (_vs_ddp_z3_keeps) of `group` (0:
   every group) but `except`: that gather did not come next (an evaluation's
   forward ended there), or the group's shard or setting is about to change. */
_VS_DDP_PRIVATE void _vs_ddp_z3_unkeep(vs_ddp* d, int group, int except)
{
    for (int b = 0; b < d->nbuckets; b++) {
        const _vs_dbucket* k = &d->buckets[b];
        if (k->zstate == _VS_Z3_KEPT && k->zroot && (!group || k->rgroup == group) && k->rgroup != except)
            _vs_ddp_z3_free(d, b);
    }
}

/* group names a ready group of d (its check for gather, release). */
_VS_DDP_PRIVATE vs_result _vs_ddp_z3_group(const char* fn, const vs_ddp* d, int group)
{
    if (!d) return vs_set_error(VS_ERR_NULL, "%s: ddp is NULL", fn);
    if (!d->finalized) return vs_set_error(VS_ERR_STATE, "%s: call vs_ddp_finalize first", fn);
    if (group == 0)
        return vs_set_error(VS_ERR_INVALID, "%s: group 0 is no ready group (it means buckets by size)", fn);
    for (int b = 0; b < d->nbuckets; b++)
        if (d->buckets[b].rgroup == group) return VS_OK;
    return vs_set_error(VS_ERR_INVALID, "%s: no parameter was registered with ready_group %d", fn, group);
}

/* The first step: group g goes on the recorded order (its only allocations
   after finalize besides the pools'). Later: *next, the position after g's:
   the expected entry; else (off the order, as after an evaluation's forward)
   the first entry when g is the order's first group (a new pass begins), else
   g's next entry ahead (groups skipped), else its first from the start. */
_VS_DDP_PRIVATE vs_result _vs_ddp_z3_record(vs_ddp* d, int g, int* next)
{
    *next = -1;
    if (d->zrecorded) {
        int at = d->zpos < d->nzorder && d->zorder[d->zpos] == g ? d->zpos : d->zorder[0] == g ? 0 : -1;
        for (int i = d->zpos; i < d->nzorder && at < 0; i++)
            if (d->zorder[i] == g) at = i;
        for (int i = 0; i < d->zpos && i < d->nzorder && at < 0; i++)
            if (d->zorder[i] == g) at = i;
        if (at >= 0) d->zpos = *next = at + 1; // (never recorded: no prefetch)
        return VS_OK;
    }
    if (d->nzorder == d->capzorder) {
        int cap = d->capzorder ? 2 * d->capzorder : 16;
        int* no = _VS_DDP_NEW(d->world, int, cap);
        if (!no) return vs_set_error(VS_ERR_NOMEM, "vs_ddp_gather: out of memory recording the gather order");
        for (int i = 0; i < d->nzorder; i++) no[i] = d->zorder[i];
        vs_free(d->world, d->zorder);
        d->zorder = no, d->capzorder = cap;
    }
    d->zorder[d->nzorder++] = g;
    return VS_OK;
}

VS_API vs_result vs_ddp_gather(vs_ddp* d, int group)
{
    const char* fn = "vs_ddp_gather";
    vs_result r = _vs_ddp_z3_group(fn, d, group);
    if (r || d->desc.zero != VS_ZERO_3) return r;
    int next;
    if ((r = _vs_ddp_z3_record(d, group, &next))) return r;
    _vs_ddp_z3_unkeep(d, 0, group);
    if (!d->zrecorded && (r = _vs_ddp_zpool_note(d, group))) return r; // (the pool's size, for the step's end)
    r = _vs_ddp_z3_issue(d, group); // its own first, then the next ones', then the wait for its own
    if (!r && next >= 0) r = _vs_ddp_z3_prefetch(d, next, group);
    for (int b = 0; b < d->nbuckets && !r; b++) {
        _vs_dbucket* k = &d->buckets[b];
        if (k->rgroup != group) continue;
        if (k->zstate == _VS_Z3_FLIGHT) r = _vs_ddp_params_ready(d, b); // (device: in stream order)
        if (!r) k->zstate = _VS_Z3_HELD; // (kept, or held already: a recompute's gather, no traffic)
    }
    return r ? vs_set_error(r, "%s: group %d: %s", fn, group, vs_last_error()) : VS_OK;
}

VS_API vs_result vs_ddp_release(vs_ddp* d, int group)
{
    const char* fn = "vs_ddp_release";
    vs_result r = _vs_ddp_z3_group(fn, d, group);
    if (r || d->desc.zero != VS_ZERO_3) return r;
    for (int b = 0; b < d->nbuckets; b++) { // all checked before any changes
        const _vs_dbucket* k = &d->buckets[b];
        if (k->rgroup != group || k->zstate == _VS_Z3_HELD) continue;
        return vs_set_error(VS_ERR_STATE, "%s: group %d is not gathered (%s)", fn, group,
                            k->zstate == _VS_Z3_KEPT     ? k->zroot ? "released already; kept for its next gather"
                                                                    : "released already; kept for its backward, reshard_after_forward 0"
                            : k->zstate == _VS_Z3_FLIGHT ? "only prefetched: vs_ddp_gather it first"
                                                         : "released already, or never gathered");
    }
    int keep = _vs_ddp_z3_keeps(d, group);
    for (int b = 0; b < d->nbuckets; b++) {
        _vs_dbucket* k = &d->buckets[b];
        if (k->rgroup != group) continue;
        if ((!k->reshard && !k->zbwd) || keep) { // (a forward's release: the backward gathers it again for free)
            k->zstate = _VS_Z3_KEPT;
            k->zroot = k->reshard || k->zbwd;
        } else {
            _vs_ddp_z3_free(d, b);
        }
    }
    return d->debug_params ? _vs_ddp_z3_debug_release(d, group) : VS_OK;
}

/* Bucket b's gradients are all marked ready in this pass: its backward is
   done, so its release frees, and a kept buffer goes now. */
_VS_DDP_PRIVATE void _vs_ddp_z3_backward_done(vs_ddp* d, int b)
{
    d->buckets[b].zbwd = 1;
    if (d->buckets[b].zstate == _VS_Z3_KEPT) _vs_ddp_z3_free(d, b);
}

/* Before a step (its gathers completed already): none held; the kept and
   prefetched ones go (stale after the step). */
_VS_DDP_PRIVATE vs_result _vs_ddp_z3_step_begin(vs_ddp* d)
{
    for (int b = 0; b < d->nbuckets; b++)
        if (d->buckets[b].zstate == _VS_Z3_HELD)
            return vs_set_error(VS_ERR_STATE, "vs_ddp_step: group %d is still gathered: vs_ddp_release it first (the "
                                "step changes the shards it was gathered from)", d->buckets[b].rgroup);
    for (int b = 0; b < d->nbuckets; b++)
        if (d->buckets[b].zstate != _VS_Z3_REST) (void)_vs_ddp_z3_drop(d, b); // (vs_ddp_step waited for the gathers)
    return VS_OK;
}

/* After a step: the order is recorded; the first groups' gathers start. */
_VS_DDP_PRIVATE vs_result _vs_ddp_z3_step_end(vs_ddp* d)
{
    d->zrecorded = d->nzorder > 0;
    d->zpos = 0;
    return _vs_ddp_z3_prefetch(d, 0, 0);
}

/* The gathered pool made before any collective runs (vs_ddp_finalize; a
   device allocation beside a collective waiting for its peers can deadlock on
   NCCL): what a trainer that gathers one group at a time can hold at once,
   the kept groups (reshard_after_forward 0) plus the current and `prefetch`
   next groups, at most every bucket. The first step's end sizes it for what
   that step held (_vs_ddp_zpool_size). */
_VS_DDP_PRIVATE vs_result _vs_ddp_zpool_reserve(vs_ddp* d)
{
    if (d->desc.zero != VS_ZERO_3) return VS_OK;
    int kept = 0, per = _vs_ddp_group_buckets(d); // buckets of kept groups; the most buckets of one group
    for (int b = 0; b < d->nbuckets; b++) kept += !d->buckets[b].reshard;
    int64_t want = (int64_t)kept + (1 + (int64_t)d->desc.prefetch) * per;
    if (want > d->nbuckets) want = d->nbuckets;
    return _vs_ddp_zpool_grow(d, (int)want);
}

/* vs_ddp_param under ZeRO-3: the view into the gathered bucket. */
_VS_DDP_PRIVATE void* _vs_ddp_z3_view(vs_ddp* d, const _vs_dparam* q)
{
    const _vs_dbucket* k = &d->buckets[q->bucket];
    if (k->zstate != _VS_Z3_HELD) {
        vs_set_error(VS_ERR_STATE, "vs_ddp_param: '%s' (ready group %d) is not gathered%s: ZeRO-3 keeps only the "
                     "owned shard between uses; call vs_ddp_gather(d, %d) first", q->name, q->rgroup,
                     k->zstate == _VS_Z3_KEPT ? " (released)" : "", q->rgroup);
        return NULL;
    }
    return (char*)k->zbuf + (size_t)q->offset * _vs_dsz(k->pdtype);
}

VS_API vs_result vs_ddp_set_group_reshard(vs_ddp* d, int group, int reshard_after_forward)
{
    const char* fn = "vs_ddp_set_group_reshard";
    if (!d) return vs_set_error(VS_ERR_NULL, "%s: ddp is NULL", fn);
    if (reshard_after_forward != 0 && reshard_after_forward != 1)
        return vs_set_error(VS_ERR_INVALID, "%s: reshard_after_forward %d (0 or 1)", fn, reshard_after_forward);
    int n = 0;
    for (int i = 0; i < d->nparams && group; i++) n += d->params[i].rgroup == group;
    if (!n) return vs_set_error(VS_ERR_INVALID, "%s: no parameter was registered with ready_group %d", fn, group);
    _vs_ddp_z3_unkeep(d, group, 0);
    for (int b = 0; b < d->nbuckets; b++)
        if (d->buckets[b].rgroup == group && d->buckets[b].zstate != _VS_Z3_REST)
            return vs_set_error(VS_ERR_STATE, "%s: group %d is gathered: set it between its uses", fn, group);
    for (int i = 0; i < d->nparams; i++)
        if (d->params[i].rgroup == group) d->params[i].reshard = reshard_after_forward;
    for (int b = 0; b < d->nbuckets; b++)
        if (d->buckets[b].rgroup == group) d->buckets[b].reshard = reshard_after_forward;
    return _vs_ddp_zpool_reserve(d); // (a group kept now: one more buffer, made between uses)
}

/* vs_ddp_owned_bytes's layout: bucket k's offset in its group's owned storage,
   and (*end) the bytes up to its end. */
_VS_DDP_PRIVATE size_t _vs_ddp_owned_at(const vs_ddp* d, int group, int b, size_t* end)
{
    size_t at = 0, e = 0;
    for (int j = 0; j <= b; j++) {
        const _vs_dbucket* k = &d->buckets[j];
        if (k->rgroup != group) continue;
        at = (e + 15) / 16 * 16;
        e = at + (size_t)k->shard * _vs_dsz(k->pdtype);
    }
    if (end) *end = e;
    return at;
}

/* vs_ddp_owned_bytes for fn. */
_VS_DDP_PRIVATE vs_result _vs_ddp_owned_bytes(const char* fn, const vs_ddp* d, int group, size_t* bytes)
{
    *bytes = 0;
    vs_result r = _vs_ddp_z3_group(fn, d, group);
    if (r) return r;
    if (d->desc.zero != VS_ZERO_3)
        return vs_set_error(VS_ERR_UNSUPPORTED, "%s: ZeRO-%d keeps whole local shards: give them as "
                            "vs_ddp_param_desc.storage", fn, (int)d->desc.zero);
    for (int b = 0; b < d->nbuckets; b++)
        if (d->buckets[b].rgroup == group) (void)_vs_ddp_owned_at(d, group, b, bytes);
    return VS_OK;
}

VS_API vs_result vs_ddp_owned_bytes(const vs_ddp* d, int group, size_t* bytes)
{
    if (!bytes) return vs_set_error(VS_ERR_NULL, "vs_ddp_owned_bytes: bytes is NULL");
    return _vs_ddp_owned_bytes("vs_ddp_owned_bytes", d, group, bytes);
}

VS_API vs_result vs_ddp_set_owned_storage(vs_ddp* d, int group, void* storage)
{
    const char* fn = "vs_ddp_set_owned_storage";
    size_t bytes = 0;
    vs_result r = _vs_ddp_owned_bytes(fn, d, group, &bytes);
    if (r) return r;
    if (!storage) return vs_set_error(VS_ERR_NULL, "%s: storage is NULL", fn);
    if ((uintptr_t)storage % 16)
        return vs_set_error(VS_ERR_INVALID, "%s: storage %p of group %d (%zu bytes) is not 16-byte aligned", fn, storage,
                            group, bytes);
    if (d->in_pass)
        return vs_set_error(VS_ERR_STATE, "%s: group %d during a backward pass: set it between steps", fn, group);
#ifdef VESCALE_NCCL // (the mesh's pointer check: not in a mock device build)
    if (d->dev) {
        char what[64];
        snprintf(what, sizeof what, "%s: group %d", fn, group);
        if ((r = vs_device_check(what, "storage", storage))) return r;
    }
#endif
    _vs_ddp_z3_unkeep(d, group, 0);
    for (int b = 0; b < d->nbuckets; b++) {
        const _vs_dbucket* k = &d->buckets[b];
        if (k->rgroup == group && (k->zstate == _VS_Z3_HELD || k->zstate == _VS_Z3_KEPT))
            return vs_set_error(VS_ERR_STATE, "%s: group %d is gathered: set it between its uses", fn, group);
    }
    for (int b = 0; b < d->nbuckets && !r; b++) { // a prefetched gather reads the old buffer: completed, dropped
        if (d->buckets[b].rgroup != group || d->buckets[b].zstate != _VS_Z3_FLIGHT) continue;
        r = _vs_ddp_z3_drop(d, b);
    }
    if (!r) r = _vs_ddp_sync(d); // (the step's writes of the owned range come first)
    for (int b = 0; b < d->nbuckets && !r; b++) {
        _vs_dbucket* k = &d->buckets[b];
        if (k->rgroup != group) continue;
        char* to = (char*)storage + _vs_ddp_owned_at(d, group, b, NULL);
        if (to != k->param) r = _vs_ddp_copy(d, to, k->param, (size_t)k->shard * _vs_dsz(k->pdtype));
    }
    if (!r) r = _vs_ddp_sync(d); // (the copies land before DDP's buffers go)
    for (int b = 0; b < d->nbuckets && !r; b++) {
        _vs_dbucket* k = &d->buckets[b];
        if (k->rgroup != group) continue;
        char* to = (char*)storage + _vs_ddp_owned_at(d, group, b, NULL);
        if (!k->pown) _vs_ddp_hfree(d, k->param);
        k->param = to, k->pown = 1;
    }
    return r ? vs_set_error(r, "%s: group %d: %s", fn, group, vs_last_error()) : VS_OK;
}

VS_API void* vs_ddp_param(vs_ddp* d, int i)
{
    if (_vs_ddp_check_index("vs_ddp_param", d, i)) return NULL;
    _vs_dparam* q = &d->params[i];
    if (d->desc.zero == VS_ZERO_3) return _vs_ddp_z3_view(d, q);
    if (_vs_ddp_params_ready(d, q->bucket)) return NULL;
    return _vs_ddp_pat(&d->buckets[q->bucket], q, q->offset);
}

VS_API vs_result vs_ddp_synchronize(vs_ddp* d)
{
    if (!d) return vs_set_error(VS_ERR_NULL, "vs_ddp_synchronize: ddp is NULL");
    if (!d->finalized) return VS_OK; // (nothing queued before finalize)
    vs_result r = VS_OK;
    for (int b = d->nbuckets - 1; b >= 0 && !r; b--) r = _vs_ddp_params_ready(d, b); // (the last first, as above)
    if (!r) r = _vs_ddp_sync(d);
    return r ? vs_set_error(r, "vs_ddp_synchronize: %s", vs_last_error()) : VS_OK;
}

/* The getters' check (vescale_mesh.h's "Getters" rule): d and a parameter index. */
_VS_DDP_PRIVATE vs_result _vs_ddp_get(const char* fn, const vs_ddp* d, int i)
{
    if (!d) return vs_set_error(VS_ERR_NULL, "%s: ddp is NULL", fn);
    if (i < 0 || i >= d->nparams)
        return vs_set_error(VS_ERR_INVALID, "%s: parameter index %d out of range [0, %d)", fn, i, d->nparams);
    return VS_OK;
}

VS_API vs_dtype vs_ddp_grad_dtype(const vs_ddp* d, int i)
{
    return _vs_ddp_get("vs_ddp_grad_dtype", d, i) ? VS_DTYPE_INVALID : d->params[i].gdtype;
}

VS_API int64_t vs_ddp_local_numel(const vs_ddp* d, int i)
{
    vs_result r = _vs_ddp_get("vs_ddp_local_numel", d, i);
    return r ? r : d->params[i].numel;
}

/* VESCALE_DEBUG=params on the host, as a backward pass begins: a parameter
   whose stale part holds NaN (smaller than a page) and whose gather is still
   in flight was read so by the forward, or not at all; remembered for the
   clip's non-finite norm to name (no page fault catches such a read). */
_VS_DDP_PRIVATE void _vs_ddp_note_stale(vs_ddp* d)
{
    d->stale_read = NULL;
    d->nstale = 0;
    for (int b = d->nbuckets - 1; b >= 0 && d->debug_params; b--) {
        const _vs_dbucket* k = &d->buckets[b];
        for (int j = k->first; j < k->last && k->gbuf; j++) {
            const _vs_dparam* q = &d->params[d->order[j]];
            if (!q->poisoned) continue;
            if (!d->stale_read) d->stale_read = q->name;
            d->nstale++;
        }
    }
}

/* A pass starts while reduced gradients of an earlier synced pass wait for a
   step: their owned ranges move into the accumulators and the buffers are
   cleared, so the new pass's local gradients reduce on their own. The usual
   single pass per step never pays for this. */
_VS_DDP_PRIVATE vs_result _vs_ddp_begin_pass(vs_ddp* d)
{
    if (d->in_pass) return VS_OK;
    d->in_pass = 1;
    d->synced = 0; // local gradients are added from now on
    for (int b = 0; b < d->nbuckets; b++) d->buckets[b].gclean = 0; // (the backward writes them)
    _vs_ddp_note_stale(d);
    for (int b = 0; b < d->nbuckets && !d->grads_pending; b++) { // the last step took them: a new sum
        _vs_dbucket* k = &d->buckets[b];
        k->fresh = k->consume || (k->fresh && d->desc.zero >= VS_ZERO_2); // (ZeRO-2/3: zeroed by vs_ddp_zero_grad)
    }
    if (!d->grads_pending || d->desc.zero >= VS_ZERO_2) return VS_OK;
    vs_result r = VS_OK;
    for (int b = 0; b < d->nbuckets && !r; b++) {
        _vs_dbucket* k = &d->buckets[b];
        if (!k->acc || k->ext) continue; // (trainer-owned: the reduced values are consumed already)
        int64_t lo, cnt;
        _vs_ddp_owned(d, k, &lo, &cnt);
        if (!k->acc_used) r = _vs_ddp_to_f32(d, k->grad_shard, (char*)k->grad + (size_t)lo * _vs_dsz(k->gdtype), k->gdtype, cnt);
        k->acc_used = 1;
        if (!r) r = _vs_ddp_zero(d, k->grad, (size_t)k->numel * _vs_dsz(k->gdtype));
    }
    return r;
}

/* The gradients' reduction, HSDP's part (the rest of the DP group handling:
   _vs_ddp_dims and _vs_ddp_groups set the groups up, the all-gathers use the
   DP group d->dp, which is the shard group, and the clip's norm counts each
   element on replicate coordinate 0 only, _vs_ddp_counted):
   - ZeRO-0 all-reduces over replicate x shard in one call (the average over
     every DP rank), _vs_ddp_reduce_comm;
   - ZeRO-1/2 reduce-scatter over the shard group, then _vs_ddp_replicas
     averages the owned range over the replicate group, before anything reads
     it (_vs_ddp_complete). */
_VS_DDP_PRIVATE vs_comm* _vs_ddp_reduce_comm(vs_ddp* d)
{
    return vs_mesh_comm(d->dp_both && d->desc.zero == VS_ZERO_0 ? d->dp_both : d->dp);
}

/* HSDP: n elements at buf, this rank's owned range reduced over the shard
   group, averaged over the replicate group (in place; VS_OK at once without
   HSDP). Device: in stream order on the DDP's stream, no host wait. */
_VS_DDP_PRIVATE vs_result _vs_ddp_replicas_avg(vs_ddp* d, void* buf, int64_t n, vs_dtype dt, vs_work** later)
{
    if (!d->dpr || n <= 0) return VS_OK;
    vs_comm* c = vs_mesh_comm(d->dpr);
    vs_work* w = NULL;
    vs_result r = _vs_ddp_fence(d, c);
    if (!r) r = vs_all_reduce(c, buf, buf, (size_t)n, dt, VS_OP_AVG, d->cu ? &w : NULL);
    if (!r && w && later) *later = w;
    else if (!r && w) r = _vs_ddp_done(d, w);
    return r;
}

/* Bucket b's owned range, reduce-scattered over the shard group, averaged over
   the replicate group: where the reduction left it (the accumulator, a
   bucket or staging buffer, or, grouped, the owned pieces of the trainer's
   gradients, one group of calls). ZeRO-0 reduced over both dims already. */
_VS_DDP_PRIVATE vs_result _vs_ddp_replicas(vs_ddp* d, int b, vs_work** later)
{
    _vs_dbucket* k = &d->buckets[b];
    if (!d->dpr || d->desc.zero == VS_ZERO_0 || d->solo) return VS_OK;
    int64_t lo = k->shard * d->dp_rank;
    size_t gz = _vs_dsz(k->gdtype);
    if (!k->grouped || k->into_acc) {
        vs_result r = _vs_ddp_replicas_avg(d, k->into_acc ? (void*)k->grad_shard : (char*)k->grad + (size_t)lo * gz,
                                           k->shard, k->gdtype, later);
        k->across = !r;
        return r;
    }
    vs_comm* c = vs_mesh_comm(d->dpr);
    vs_work* w = NULL;
    vs_result r = _vs_ddp_fence(d, c);
    if (r || (r = vs_group_start(c))) return r;
    for (int j = k->first; j < k->last && !r; j++) {
        const _vs_dparam* q = &d->params[d->order[j]];
        int64_t a, e;
        if (!_vs_ddp_meet(q, lo, k->shard, &a, &e)) continue;
        char* at = (char*)q->gext + (size_t)(a - q->offset) * gz;
        r = vs_all_reduce(c, at, at, (size_t)(e - a), k->gdtype, VS_OP_AVG, NULL);
    }
    vs_result re = vs_group_end(c, r || !d->cu ? NULL : &w);
    if (!r && !re && w && later) *later = w;
    else if (!r && !re && w) re = _vs_ddp_done(d, w);
    k->across = !r && !re;
    return r ? r : re;
}

/* Waits for bucket b's reduction; ZeRO-2 then adds the owned range into the
   shard accumulator and gives the staging buffer back. */
_VS_DDP_PRIVATE vs_result _vs_ddp_complete(vs_ddp* d, int b)
{
    _vs_dbucket* k = &d->buckets[b];
    vs_result r = VS_OK;
    if (k->done) return VS_OK;
    if (k->work) {
        r = _vs_ddp_done(d, k->work);
        k->work = NULL;
    }
    if (!r && k->launched && !k->across) r = _vs_ddp_replicas(d, b, NULL);
    if (r) return r;
    // gradients that are also partial over other dims (sequence-parallel norms)
    int64_t lo, cnt;
    _vs_ddp_owned(d, k, &lo, &cnt);
    void* base = k->grad ? (char*)k->grad + (size_t)lo * _vs_dsz(k->gdtype) : NULL;
    for (int dim = 0; dim < vs_mesh_ndims(d->mesh) && k->launched && !r; dim++) {
        if (!(k->partial_mask & (1u << dim))) continue;
        vs_mesh* sub;
        r = vs_mesh_submesh(d->mesh, vs_mesh_dim_name(d->mesh, dim), &sub);
        vs_work* w = NULL;
        if (!r) r = _vs_ddp_fence(d, vs_mesh_comm(sub));
        if (!r) r = vs_all_reduce(vs_mesh_comm(sub), base, base, (size_t)cnt, k->gdtype, VS_OP_SUM, d->cu ? &w : NULL);
        if (!r && w) r = _vs_ddp_done(d, w);
    }
    if (r || !k->launched) return r;
    /* into the accumulator: written by the step's first pass (fresh), added
       to by a later one; nothing to do where the reduction wrote it already */
    vs_result (*take)(const vs_ddp*, float*, const void*, vs_dtype, int64_t) = k->fresh ? _vs_ddp_to_f32 : _vs_ddp_add_f32;
    if (k->acc_used && k->grad && !k->into_acc && (r = take(d, k->grad_shard, base, k->gdtype, cnt)))
        return r;
    /* the trainer's gradients: with an accumulator, cleared once it has taken
       the reduced range (in place: the owned pieces taken from them first; a
       staging buffer: above), the step's one zeroing of them, unless the
       trainer zeroes them itself; else, staged, the average copied back (in
       place it is there already) */
    int clear = k->consume && !d->desc.trainer_zero_grad;
    for (int j = k->first; j < k->last && k->ext && !r; j++) {
        const _vs_dparam* q = &d->params[d->order[j]];
        size_t gz = _vs_dsz(k->gdtype);
        int64_t a, e;
        if (k->consume && !k->staged && !k->into_acc && _vs_ddp_meet(q, lo, cnt, &a, &e))
            r = take(d, k->grad_shard + (a - lo), _vs_ddp_gat(k, q, a), k->gdtype, e - a);
        if (!r && clear)
            r = _vs_ddp_zero(d, q->gext, (size_t)q->numel * gz);
        else if (!r && k->staged && !k->consume)
            r = _vs_ddp_copy(d, q->gext, (char*)k->grad + (size_t)q->offset * gz, (size_t)q->numel * gz);
    }
    if (r) return r;
    k->gclean = clear; // (vs_ddp_zero_grad need not zero them again)
    k->fresh = k->into_acc = k->across = 0;
    if ((d->desc.zero >= VS_ZERO_2 || k->ext) && k->staged) {
        _vs_ddp_pool_give(d, b);
        k->grad = NULL;
        k->staged = 0;
    }
    k->done = 1;
    return VS_OK;
}

_VS_DDP_PRIVATE vs_result _vs_ddp_stage(vs_ddp* d, int b);
_VS_DDP_PRIVATE vs_result _vs_ddp_launch_ready(vs_ddp* d, int all);
_VS_DDP_PRIVATE vs_result _vs_ddp_pool_take(vs_ddp* d, int owner, int may_launch, void** buf);

/* VESCALE_LOG=debug: bucket b's launch with its tensors, in bucket order. */
_VS_DDP_PRIVATE void _vs_ddp_log_launch(const vs_ddp* d, int b)
{
    const _vs_dbucket* k = &d->buckets[b];
    char names[640];
    size_t n = 0;
    names[0] = 0;
    for (int j = k->first; j < k->last; j++) {
        const char* nm = d->params[d->order[j]].name;
        if (n + strlen(nm) + 24 >= sizeof names) {
            snprintf(names + n, sizeof names - n, " and %d more", k->last - j);
            break;
        }
        n += (size_t)snprintf(names + n, sizeof names - n, "%s'%s'", j > k->first ? ", " : "", nm);
    }
    vs_log(d->world, VS_LOG_DEBUG, "vs_ddp: bucket %d of %d launches its %s (%lld elements, %d tensors): %s", b,
           d->nbuckets, d->desc.zero == VS_ZERO_0 ? "all-reduce" : "reduce-scatter", (long long)k->numel,
           k->last - k->first, names);
}

_VS_DDP_PRIVATE vs_result _vs_ddp_launch(vs_ddp* d, int b)
{
    _vs_dbucket* k = &d->buckets[b];
    vs_comm* c = _vs_ddp_reduce_comm(d);
    if (d->log_debug) _vs_ddp_log_launch(d, b);
    vs_work** wp = d->desc.no_overlap && !d->cu ? NULL : &k->work; // (a device never blocks the host here)
    if (d->desc.zero >= VS_ZERO_2 && !k->staged) { // no gradient asked for here: take part with zeros
        vs_result r = _vs_ddp_stage(d, b);
        if (r) return r;
    }
    /* the step's first reduction of a trainer's f32 gradients (ZeRO-2/3: of
       any, after vs_ddp_zero_grad) lands in the accumulator itself: no
       zeroing, no copy after (_vs_ddp_complete). One rank (solo): no
       reduction, so no call; _vs_ddp_complete's copy or cast into the
       accumulator, on the trainer's stream, is all there is to do, ordered
       after the backward by that stream alone */
    k->into_acc = k->fresh && k->gdtype == VS_F32 && !k->partial_mask && !d->solo;
    float* acc = k->into_acc ? k->grad_shard : NULL; // (the owned range's, from element shard x dp_rank)
    if (k->grouped && d->solo) {
        k->launched = 1;
        return VS_OK;
    }
    if (k->grouped) { // each of the trainer's gradients in place, one group
        vs_result r = _vs_ddp_fence(d, c);
        if (r || (r = vs_group_start(c))) return r;
        size_t gz = _vs_dsz(k->gdtype);
        for (int j = k->first; j < k->last && !r; j++) {
            const _vs_dparam* q = &d->params[d->order[j]];
            if (d->desc.zero == VS_ZERO_0) {
                r = vs_all_reduce(c, q->gext, q->gext, (size_t)q->numel, k->gdtype, VS_OP_AVG, NULL);
                continue;
            }
            /* ZeRO-1: each piece of the parameter to the DP rank that owns it (the
               reduce-scatter of the bucket, a call per piece) */
            for (int o = 0; o < d->dp_size && !r; o++) {
                int64_t a, e;
                if (!_vs_ddp_meet(q, k->shard * o, k->shard, &a, &e)) continue;
                char* at = (char*)q->gext + (size_t)(a - q->offset) * gz;
                void* to = acc && o == d->dp_rank ? (void*)(acc + (a - k->shard * o)) : (void*)at;
                r = vs_reduce(c, at, to, (size_t)(e - a), k->gdtype, VS_OP_AVG, o, NULL);
            }
        }
        vs_result re = vs_group_end(c, r ? NULL : wp);
        k->launched = 1;
        return r ? r : re;
    }
    if (k->ext) { // the trainer's gradients, wherever they lie, packed into a staging buffer
        void* buf = NULL;
        vs_result r = _vs_ddp_pool_take(d, b, 0, &buf);
        size_t gz = _vs_dsz(k->gdtype);
        for (int j = k->first; j < k->last && !r; j++) {
            const _vs_dparam* q = &d->params[d->order[j]];
            r = _vs_ddp_copy(d, (char*)buf + (size_t)q->offset * gz, q->gext, (size_t)q->numel * gz);
        }
        if (r) return r;
        k->grad = buf;
        k->staged = 1;
    }
    k->launched = 1;
    if (d->solo) return VS_OK;
    vs_result r = _vs_ddp_fence(d, c); // backward's writes to the bucket come first
    if (r) return r;
    if (d->desc.zero == VS_ZERO_0)
        return vs_all_reduce(c, k->grad, k->grad, (size_t)k->numel, k->gdtype, VS_OP_AVG, wp);
    void* mine = acc ? (void*)k->grad_shard : (char*)k->grad + (size_t)(k->shard * d->dp_rank) * _vs_dsz(k->gdtype);
    return vs_reduce_scatter(c, k->grad, mine, (size_t)k->shard, k->gdtype, VS_OP_AVG, wp);
}

/* Launches, in bucket order, every bucket whose gradients are all ready. On the
   host, trainer-owned ZeRO-1 buckets reduced in place whose reduction is done
   are completed too (their accumulation and clearing then overlap the rest of
   the backward, rather than all waiting for finish_grad_sync). */
_VS_DDP_PRIVATE vs_result _vs_ddp_launch_ready(vs_ddp* d, int all)
{
    while (d->next_launch < d->nbuckets) {
        _vs_dbucket* k = &d->buckets[d->next_launch];
        if (!all && k->nready < k->last - k->first) break;
        vs_result r = _vs_ddp_launch(d, d->next_launch);
        /* HSDP on a device: the replicate group's all-reduce queued at once,
           its stream after the reduce-scatter (not the trainer's: that would
           hold the rest of the backward behind both), its work the bucket's to
           complete; the host path must wait for the reduce-scatter first: at
           completion, _vs_ddp_complete */
        if (!r && d->cu && d->dpr && d->desc.zero != VS_ZERO_0) {
            vs_work* rs = k->work;
            k->work = NULL;
            if (rs) r = vs_wait_stream(rs, vs_comm_stream(vs_mesh_comm(d->dpr)));
            if (!r) r = _vs_ddp_replicas(d, d->next_launch, &k->work);
        }
        if (r) return r;
        d->next_launch++;
    }
    /* (in launch order, from the first not completed: a reduction still in
       flight ends the look, as the later ones were launched after it) */
    for (; d->next_done < d->next_launch && !d->cu && !all; d->next_done++) {
        _vs_dbucket* k = &d->buckets[d->next_done];
        int done = 0;
        if (!k->grouped || !k->consume || k->done || !k->work) continue;
        vs_result r = vs_test(k->work, &done);
        if (!r && !done) break;
        if (!r) r = _vs_ddp_complete(d, d->next_done);
        if (r) return r;
    }
    return VS_OK;
}

/* A free staging buffer for `owner` (b: bucket b's gradients; -2 - b: its
   all-gather). When the pool is empty: an all-gather held is completed and
   written out, else the oldest launched reduction completes (with may_launch,
   the ready buckets are launched first when none is: ZeRO-2 without overlap). */
_VS_DDP_PRIVATE vs_result _vs_ddp_pool_take(vs_ddp* d, int owner, int may_launch, void** buf)
{
    for (;;) {
        for (int i = 0; i < d->npool; i++)
            if (d->pool_owner[i] == -1) {
                d->pool_owner[i] = owner;
                *buf = d->pool[i];
                return VS_OK;
            }
        int gathered = -1;
        for (int i = 0; i < d->npool && gathered < 0; i++)
            if (d->pool_owner[i] <= -2) gathered = -2 - d->pool_owner[i];
        if (gathered >= 0) {
            vs_result r = _vs_ddp_params_ready(d, gathered);
            if (r) return r;
            continue;
        }
        int oldest = -1;
        for (int pass = 0; pass < 1 + may_launch && oldest < 0; pass++) {
            // without overlap nothing was launched yet: reduce the ready buckets now
            if (pass == 1) {
                vs_result r = _vs_ddp_launch_ready(d, 0);
                if (r) return r;
            }
            for (int i = 0; i < d->npool; i++) {
                int o = d->pool_owner[i];
                if (o >= 0 && d->buckets[o].launched && !d->buckets[o].done && (oldest < 0 || o < oldest)) oldest = o;
            }
        }
        if (oldest < 0)
            return vs_set_error(VS_ERR_STATE,
                                "vs_ddp_grad: %s has %d staging buffers, all held by buckets still being filled "
                                "(raise zero2_buffers or mark gradients ready sooner)",
                                d->desc.zero >= VS_ZERO_2 ? (d->desc.zero == VS_ZERO_3 ? "ZeRO-3" : "ZeRO-2") : "vs_ddp",
                                d->npool);
        vs_result r = _vs_ddp_complete(d, oldest);
        if (r) return r;
    }
}

/* ZeRO-2: a zeroed staging buffer for bucket b's gradients. */
_VS_DDP_PRIVATE vs_result _vs_ddp_stage(vs_ddp* d, int b)
{
    _vs_dbucket* k = &d->buckets[b];
    if (k->staged) return VS_OK;
    if (k->launched)
        return vs_set_error(VS_ERR_STATE, "vs_ddp_grad: bucket %d was already reduced in this backward pass", b);
    void* buf = NULL;
    vs_result r = _vs_ddp_pool_take(d, b, 1, &buf);
    if (r) return r;
    k->grad = buf;
    k->staged = 1;
    return _vs_ddp_zero(d, k->grad, (size_t)k->numel * _vs_dsz(k->gdtype));
}

VS_API void* vs_ddp_grad(vs_ddp* d, int i)
{
    if (_vs_ddp_check_index("vs_ddp_grad", d, i)) return NULL;
    _vs_dparam* q = &d->params[i];
    _vs_dbucket* k = &d->buckets[q->bucket];
    if (_vs_ddp_begin_pass(d)) return NULL;
    if (q->gext) return q->gext;
    if (d->desc.zero >= VS_ZERO_2 && _vs_ddp_stage(d, q->bucket)) return NULL;
    return (char*)k->grad + (size_t)q->offset * _vs_dsz(q->gdtype);
}

VS_API const void* vs_ddp_grad_synced(vs_ddp* d, int i)
{
    if (_vs_ddp_check_index("vs_ddp_grad_synced", d, i)) return NULL;
    _vs_dparam* q = &d->params[i];
    _vs_dbucket* k = &d->buckets[q->bucket];
    if (d->in_pass) {
        vs_set_error(VS_ERR_STATE, "vs_ddp_grad_synced: '%s': a backward pass is in progress", q->name);
        return NULL;
    }
    if (k->acc_used || (!k->grad && !k->ext)) {
        vs_set_error(VS_ERR_UNSUPPORTED, "vs_ddp_grad_synced: '%s': its reduced gradient lives only in the owned f32 "
                     "range (ZeRO-%d%s): read it with vs_ddp_grad_synced_owned", q->name, (int)d->desc.zero,
                     d->desc.zero >= VS_ZERO_2 ? "" : k->consume ? ", trainer-owned storage" : ", several synced passes");
        return NULL;
    }
    return _vs_ddp_gat(k, q, q->offset);
}

VS_API vs_result vs_ddp_zero_grad(vs_ddp* d)
{
    if (!d) return vs_set_error(VS_ERR_NULL, "vs_ddp_zero_grad: ddp is NULL");
    if (!d->finalized) return vs_set_error(VS_ERR_STATE, "vs_ddp_zero_grad: call vs_ddp_finalize first");
    if (d->in_pass)
        return vs_set_error(VS_ERR_STATE, "vs_ddp_zero_grad: a backward pass is in progress (call vs_ddp_finish_grad_sync)");
    vs_result r = VS_OK;
    for (int b = d->nbuckets - 1; b >= 0 && !r && d->desc.zero != VS_ZERO_3; b--) // (a ZeRO step's gathers; ZeRO-3's
        r = _vs_ddp_params_ready(d, b);                                            // are prefetches: not waited for)
    for (int b = 0; b < d->nbuckets && !r; b++) {
        _vs_dbucket* k = &d->buckets[b];
        int64_t lo, own;
        _vs_ddp_owned(d, k, &lo, &own);
        if (k->grad && d->desc.zero < VS_ZERO_2 && !k->ext) r = _vs_ddp_zero(d, k->grad, (size_t)k->numel * _vs_dsz(k->gdtype));
        if (k->staged && d->desc.zero == VS_ZERO_3 && !r) { // (kept by passes without sync: dropped)
            _vs_ddp_pool_give(d, b);
            k->grad = NULL, k->staged = 0;
        }
        // the trainer's gradients: once a step, by DDP unless the trainer does it (trainer_zero_grad)
        int zero_ext = k->ext && !k->gclean && !d->desc.trainer_zero_grad;
        for (int j = k->first; j < k->last && zero_ext && !r; j++)
            r = _vs_ddp_zero(d, d->params[d->order[j]].gext, (size_t)d->params[d->order[j]].numel * _vs_dsz(k->gdtype));
        if (zero_ext && !r) k->gclean = 1;
        if (k->grad_shard && !r) r = _vs_ddp_zero(d, k->grad_shard, sizeof(float) * (size_t)own);
        k->acc_used = d->desc.zero >= VS_ZERO_2 || k->consume;
        /* ZeRO-2/3: the accumulator holds zeros, so the step's first reduction
           writes it (f32: straight from the reduce-scatter, _vs_ddp_launch)
           rather than adding to it: no pass over it on the host after */
        k->fresh = k->consume || (d->desc.zero >= VS_ZERO_2 && !k->ext && k->grad_shard);
    }
    d->grads_pending = 0;
    d->synced = 0;
    d->skip_next = 0;
    d->clipped = 0;
    return r;
}

/* ZeRO-3 without sync: the staging pool grows to a buffer a bucket (each
   keeps its full gradients until a synced pass reduces them), made here
   between steps with no collective in flight (the prefetched gathers
   completed first), so no pass allocates. */
_VS_DDP_PRIVATE vs_result _vs_ddp_pool_for_all(vs_ddp* d)
{
    if (!d->finalized || d->npool >= d->nbuckets || !d->pool_bytes) return VS_OK;
    vs_result r = vs_ddp_synchronize(d);
    void** np = r ? NULL : _VS_DDP_NEW(d->world, void*, d->nbuckets);
    int* no = np ? _VS_DDP_NEW(d->world, int, d->nbuckets) : NULL;
    if (!r && !no) r = vs_set_error(VS_ERR_NOMEM, "vs_ddp_set_sync: out of memory");
    for (int i = 0; i < d->nbuckets && !r; i++) {
        np[i] = i < d->npool ? d->pool[i] : _vs_ddp_zalloc(d, d->pool_bytes);
        no[i] = i < d->npool ? d->pool_owner[i] : -1;
        if (!np[i]) {
            for (int j = d->npool; j < i; j++) _vs_ddp_hfree(d, np[j]);
            r = vs_set_error(VS_ERR_NOMEM, "vs_ddp_set_sync: out of memory for %d full-size gradient buffers of %zu "
                             "bytes (ZeRO-3 without sync keeps every bucket's)", d->nbuckets, d->pool_bytes);
        }
    }
    if (r) {
        vs_free(d->world, np);
        vs_free(d->world, no);
        return r;
    }
    vs_free(d->world, d->pool);
    vs_free(d->world, d->pool_owner);
    d->pool = np, d->pool_owner = no, d->npool = d->nbuckets;
    return VS_OK;
}

VS_API vs_result vs_ddp_set_sync(vs_ddp* d, int sync)
{
    if (!d) return vs_set_error(VS_ERR_NULL, "vs_ddp_set_sync: ddp is NULL");
    if (d->in_pass) return vs_set_error(VS_ERR_STATE, "vs_ddp_set_sync: not during a backward pass");
    if (!sync && d->desc.zero == VS_ZERO_2)
        return vs_set_error(VS_ERR_UNSUPPORTED,
                            "vs_ddp_set_sync: ZeRO-2 keeps no full gradients, so it reduces every micro-batch "
                            "(accumulation happens in the owned ranges)");
    if (!sync && d->desc.zero == VS_ZERO_3) {
        vs_result r = _vs_ddp_pool_for_all(d);
        if (r) return r;
    }
    d->sync = sync != 0;
    return VS_OK;
}

/* Parameter i may be marked ready now (fn: the caller's name). */
_VS_DDP_PRIVATE vs_result _vs_ddp_may_ready(const char* fn, const vs_ddp* d, int i)
{
    const _vs_dparam* q = &d->params[i];
    if (q->ready) return vs_set_error(VS_ERR_STATE, "%s: '%s' marked ready twice in one backward pass", fn, q->name);
    if (d->desc.zero >= VS_ZERO_2 && !d->buckets[q->bucket].staged)
        return vs_set_error(VS_ERR_STATE, "%s: '%s': ask vs_ddp_grad for its gradient first (ZeRO-%d)", fn, q->name,
                            (int)d->desc.zero);
    return VS_OK;
}

/* Marks parameter i ready. A bucket it completes that must wait for an
   earlier one still open (buckets launch in order) has lost its overlap with
   the backward: said once a DDP, naming the two tensors. */
_VS_DDP_PRIVATE void _vs_ddp_mark_ready(vs_ddp* d, int i)
{
    _vs_dparam* q = &d->params[i];
    _vs_dbucket* k = &d->buckets[q->bucket];
    q->ready = 1;
    k->nready++;
    if (d->desc.zero == VS_ZERO_3 && k->nready == k->last - k->first) _vs_ddp_z3_backward_done(d, q->bucket);
    if (d->warned_order || !d->sync || d->desc.no_overlap || k->nready < k->last - k->first) return;
    int ob = -1; // the first bucket before it still open
    for (int b = d->next_launch; b < q->bucket && ob < 0; b++)
        if (d->buckets[b].nready < d->buckets[b].last - d->buckets[b].first) ob = b;
    if (ob < 0) return;
    const _vs_dbucket* open = &d->buckets[ob];
    const char* held = "?";
    for (int j = open->first; j < open->last; j++)
        if (!d->params[d->order[j]].ready) {
            held = d->params[d->order[j]].name;
            break;
        }
    d->warned_order = 1;
    vs_log(d->world, VS_LOG_WARN,
           "vs_ddp: gradients become ready out of registration order: '%s' completes bucket %d, which waits for "
           "bucket %d, whose '%s' is not ready yet: buckets reduce in bucket order (the reverse of registration), so "
           "bucket %d cannot overlap the backward. Register parameters in the order the forward first uses them, and a "
           "tensor used first and last (a tied embedding) where its gradient completes (said once)",
           q->name, q->bucket, ob, held, q->bucket);
}

VS_API vs_result vs_ddp_grad_ready(vs_ddp* d, int i)
{
    const char* fn = "vs_ddp_grad_ready";
    vs_result r = _vs_ddp_check_index(fn, d, i);
    if (r || (r = _vs_ddp_may_ready(fn, d, i))) return r;
    if ((r = _vs_ddp_begin_pass(d))) return r;
    _vs_ddp_mark_ready(d, i);
    if (!d->sync || d->desc.no_overlap) return VS_OK;
    return _vs_ddp_launch_ready(d, 0);
}

VS_API vs_result vs_ddp_group_ready(vs_ddp* d, int group)
{
    const char* fn = "vs_ddp_group_ready";
    if (!d) return vs_set_error(VS_ERR_NULL, "%s: ddp is NULL", fn);
    if (!d->finalized) return vs_set_error(VS_ERR_STATE, "%s: call vs_ddp_finalize first", fn);
    if (group == 0)
        return vs_set_error(VS_ERR_INVALID, "%s: group 0 is no ready group (it means buckets by size): mark those "
                            "parameters with vs_ddp_grad_ready", fn);
    int n = 0;
    vs_result r = VS_OK;
    for (int i = 0; i < d->nparams && !r; i++) // all checked before any is marked
        if (d->params[i].rgroup == group) n++, r = _vs_ddp_may_ready(fn, d, i);
    if (r) return r;
    if (!n)
        return vs_set_error(VS_ERR_INVALID, "%s: no parameter was registered with ready_group %d", fn, group);
    if ((r = _vs_ddp_begin_pass(d))) return r;
    for (int j = 0; j < d->nparams; j++) // in bucket order (a group over two buckets completes the first first)
        if (d->params[d->order[j]].rgroup == group) _vs_ddp_mark_ready(d, d->order[j]);
    if (!d->sync || d->desc.no_overlap) return VS_OK;
    return _vs_ddp_launch_ready(d, 0);
}

VS_API vs_result vs_ddp_finish_grad_sync(vs_ddp* d)
{
    if (!d) return vs_set_error(VS_ERR_NULL, "vs_ddp_finish_grad_sync: ddp is NULL");
    if (!d->finalized) return vs_set_error(VS_ERR_STATE, "vs_ddp_finish_grad_sync: call vs_ddp_finalize first");
    if (!d->in_pass && d->grads_pending && d->sync) // reducing again would mix reduced and local values
        return vs_set_error(VS_ERR_STATE, "vs_ddp_finish_grad_sync: called twice: the gradients are synchronized "
                                          "already and no backward pass started since (vs_ddp_grad / vs_ddp_grad_ready)");
    vs_result r = VS_OK;
    d->skip_next = 0; // new gradients: an earlier non-finite norm no longer applies
    d->clipped = 0;   // (nor an earlier clip)
    if (d->sync) {
        r = _vs_ddp_launch_ready(d, 1);
        /* the last launched first: on a device the reductions queue on one
           stream, so one host wait covers them all (the others' events are done
           by then); each bucket's own completion is independent of the order */
        for (int b = d->nbuckets - 1; b >= 0; b--) {
            vs_result rb = _vs_ddp_complete(d, b);
            if (!r) r = rb;
        }
        d->grads_pending = r == VS_OK;
    }
    d->synced = d->sync && r == VS_OK;
    for (int i = 0; i < d->nparams; i++) d->params[i].ready = 0;
    for (int b = 0; b < d->nbuckets; b++)
        d->buckets[b].nready = 0, d->buckets[b].launched = 0, d->buckets[b].done = 0, d->buckets[b].zbwd = 0;
    d->next_launch = d->next_done = 0;
    d->in_pass = 0;
    return r;
}

/* The averaged gradient of the owned range of bucket k, as f32 in d->scratch
   (or the buffer itself when it is f32 already). */
_VS_DDP_PRIVATE vs_result _vs_ddp_owned_grad(vs_ddp* d, _vs_dbucket* k, int64_t lo, int64_t n, float** g)
{
    if (k->ext && !k->acc_used) { // the trainer's averaged gradients: parameter by parameter (_vs_ddp_seg_grad)
        *g = NULL;
        return VS_OK;
    }
    *g = k->acc_used ? k->grad_shard : k->gdtype == VS_F32 ? (float*)k->grad + lo : d->scratch;
    if (*g != d->scratch) return VS_OK;
    return _vs_ddp_to_f32(d, d->scratch, (char*)k->grad + (size_t)lo * _vs_dsz(k->gdtype), k->gdtype, n);
}

/* The f32 gradient of elements [a, e) of bucket k (inside parameter q; lo: the
   owned range's start): from g, _vs_ddp_owned_grad's, or else from the
   trainer's storage, converted into the scratch where it is not f32. */
_VS_DDP_PRIVATE vs_result _vs_ddp_seg_grad(vs_ddp* d, const _vs_dbucket* k, const _vs_dparam* q, int64_t a, int64_t e,
                                           int64_t lo, float* g, float** out)
{
    if (g) {
        *out = g + (a - lo);
        return VS_OK;
    }
    void* src = _vs_ddp_gat(k, q, a);
    if (k->gdtype == VS_F32) {
        *out = (float*)src;
        return VS_OK;
    }
    *out = d->scratch + (a - lo);
    return _vs_ddp_to_f32(d, *out, src, k->gdtype, e - a);
}

/* *ss += the sum of squares of g[0..n) (device: into the partial sums of the
   counted elements, or of the copies, read by _vs_ddp_sumsq_total). */
_VS_DDP_PRIVATE vs_result _vs_ddp_sumsq(const vs_ddp* d, const float* g, int64_t n, double* ss, int copy)
{
    long long nn = n;
#ifdef _VS_DDP_CUDA
    double* part = d->cu ? d->cu->part + (copy ? _VS_KPARTS : 0) : NULL;
#else
    (void)copy;
    double* part = NULL;
#endif
    void* args[] = {&g, &nn, &part};
    if (d->cu) return _vs_ddp_kernel(d, _VS_KI_SUMSQ, n, args);
    for (long long x = 0; x < nn; x++) *ss += (double)g[x] * (double)g[x];
    return VS_OK;
}

/* The global sum of squares: this rank's, all-reduced over the whole mesh.
   - The copies' sum (ssc) adds 0 times itself: nothing when it is finite, a NaN
     when it is not, so a NaN or inf in any copy of a gradient reaches every
     rank in the same single all-reduce.
   - On the device the partial sums stay there: they are all-reduced element by
     element (ordered after the kernels that wrote them), then read once, and
     every rank adds the same reduced partials in the same order, so all get
     the same total (one host read a clip; it was a copy out, a host sum, a
     copy in, the all-reduce and a copy out, with two stream syncs). */
_VS_DDP_PRIVATE vs_result _vs_ddp_sumsq_total(vs_ddp* d, double* ss, double ssc, const vs_clip_desc* clip)
{
    vs_comm* c = vs_mesh_comm(d->mesh);
    int nc = clip->ncarry;
#ifdef _VS_DDP_CUDA
    if (d->cu) {
        double part[_VS_KPART_ALL];
        /* NCCL: the read is queued on the all-reduce's stream into pinned
           memory, and the one wait is for that stream, with the deadline and
           the job's faults watched (vs_sync_stream: a copy to pageable memory
           would wait as long as a dead peer leaves the all-reduce unfinished);
           the handle is complete then. A host transport's all-reduce blocks
           instead */
        int ordered = vs_comm_device(c);
        vs_work* w = NULL;
        vs_result r = VS_OK;
        if (nc > 0 && clip->carry) // (after the caller's writes on the DDP's stream, into zeroed slots)
            r = _vs_ddp_copy(d, d->cu->part + 2 * _VS_KPARTS, clip->carry, sizeof(double) * (size_t)nc);
        if (!r && d->cu->drec) r = _vs_ddp_copy(d, d->cu->part + _VS_KPART_DBG, d->cu->drec, sizeof(double));
        if (!r) r = _vs_ddp_fence(d, c);
        if (!r && vs_comm_size(c) > 1) // (a mesh of one rank: the sum is its own, no call)
            r = vs_all_reduce(c, d->cu->part, d->cu->part, _VS_KPART_ALL, VS_F64, VS_OP_SUM, ordered ? &w : NULL);
        if (!r && ordered) {
            cudaError_t e = cudaMemcpyAsync(d->cu->hpart, d->cu->part, sizeof part, cudaMemcpyDefault,
                                            (cudaStream_t)vs_comm_stream(c));
            if (e == cudaSuccess && d->cu->drec) // (this rank's own record, in the same read)
                e = cudaMemcpyAsync(d->cu->hpart + _VS_KPART_ALL, d->cu->drec, sizeof(double), cudaMemcpyDefault,
                                    (cudaStream_t)vs_comm_stream(c));
            if (e != cudaSuccess) r = _vs_ddp_cuerr(e, "reading the partial sums of squares");
            if (!r) r = vs_sync_stream(c, vs_comm_stream(c));
            if (!r) memcpy(part, d->cu->hpart, sizeof part);
            d->cu->wrote[1] = d->cu->drec ? d->cu->hpart[_VS_KPART_ALL] : 0;
        } else if (!r) {
            r = _vs_ddp_copy(d, part, d->cu->part, sizeof part);
            if (!r && d->cu->drec) r = _vs_ddp_copy(d, &d->cu->wrote[1], d->cu->drec, sizeof(double));
        }
        d->cu->wrote[0] = r ? 0 : part[_VS_KPART_DBG];
        if (w) {
            vs_result rw = vs_wait(w);
            if (!r) r = rw;
        }
        for (int i = 0; i < _VS_KPARTS && !r; i++) *ss += part[i], ssc += part[_VS_KPARTS + i];
        for (int i = 0; i < nc && !r; i++) clip->carry_out[i] = part[2 * _VS_KPARTS + i];
        *ss += 0.0 * ssc;
        return r;
    }
#endif
    /* the host: the sum and the carried values in one all-reduce, of the same
       size on every rank whatever each carries */
    double v[1 + VS_CLIP_CARRY_MAX] = {0};
    v[0] = *ss + 0.0 * ssc;
    for (int i = 0; i < nc && clip->carry; i++) v[1 + i] = clip->carry[i];
    vs_result r = vs_comm_size(c) > 1 ? vs_all_reduce(c, v, v, 1 + VS_CLIP_CARRY_MAX, VS_F64, VS_OP_SUM, NULL) : VS_OK;
    *ss = v[0];
    for (int i = 0; i < nc && !r; i++) clip->carry_out[i] = v[1 + i];
    return r;
}

/* VESCALE_DEBUG=params, ZeRO-3 on a device, after the norm's read: a canary
   found changed on some rank (a write into a released buffer) refuses the step
   on every rank, the writer naming the parameter; the record starts again. */
_VS_DDP_PRIVATE vs_result _vs_ddp_z3_written(vs_ddp* d, const char* fn)
{
#ifdef _VS_DDP_CUDA
    if (!d->cu || !d->cu->drec || d->cu->wrote[0] == 0) return VS_OK;
    double mine = d->cu->wrote[1];
    d->cu->wrote[0] = d->cu->wrote[1] = 0;
    d->skip_next = 1; // (the same on every rank)
    vs_result r = _vs_ddp_zero(d, d->cu->drec, sizeof(double));
    if (r) return r;
    int i = mine > 0 ? (int)mine - 1 : -1, b = i - d->nparams; // (a parameter, or the padding of bucket b)
    char what[300];
    if (i >= 0 && i < d->nparams)
        snprintf(what, sizeof what, "rank %d wrote into parameter '%.150s' of ready group %d after vs_ddp_release(%d)",
                 vs_world_rank(d->world), d->params[i].name, d->params[i].rgroup, d->params[i].rgroup);
    else if (b >= 0 && b < d->nbuckets)
        snprintf(what, sizeof what, "rank %d wrote into the padding of ready group %d after vs_ddp_release(%d)",
                 vs_world_rank(d->world), d->buckets[b].rgroup, d->buckets[b].rgroup);
    else
        snprintf(what, sizeof what, "another rank wrote into a released ZeRO-3 buffer (its error names the parameter)");
    return vs_set_error(VS_ERR_STATE, "%s: VESCALE_DEBUG=params: %s (its canary had changed when the buffer was handed "
                        "out again): a view is valid until its release; the next vs_ddp_step is skipped", fn, what);
#else
    (void)d, (void)fn;
    return VS_OK;
#endif
}

/* VESCALE_DEBUG=params, ZeRO-3 on a device, a non-finite gradient norm (every
   rank here): the parameter whose released-buffer NaN reached this rank's
   owned gradients with its payload (f32), agreed over the mesh (the largest
   index: every rank names the same one); -1 none. A host wait or two: on this
   error path only. */
_VS_DDP_PRIVATE vs_result _vs_ddp_z3_nan_source(vs_ddp* d, int* param)
{
    *param = -1;
#ifdef _VS_DDP_CUDA
    if (!d->cu || !d->cu->drec) return VS_OK;
    double code = 0;
    vs_result r = VS_OK;
    for (int b = 0; b < d->nbuckets && !r && code == 0; b++) {
        _vs_dbucket* k = &d->buckets[b];
        int64_t lo, n;
        _vs_ddp_owned(d, k, &lo, &n);
        float* g = NULL;
        if (k->pdtype != VS_F32 || n <= 0 || (r = _vs_ddp_owned_grad(d, k, lo, n, &g)) || !g) continue;
        uint32_t* h = (uint32_t*)vs_alloc(d->world, sizeof(uint32_t) * (size_t)n);
        if (!h) return vs_set_error(VS_ERR_NOMEM, "vs_ddp: out of memory reading the gradients (VESCALE_DEBUG=params)");
        if (!(r = _vs_ddp_copy(d, h, g, sizeof(uint32_t) * (size_t)n))) r = _vs_ddp_sync(d);
        for (int64_t x = 0; x < n && !r && code == 0; x++)
            if ((h[x] & 0x7ffc0000u) == _VS_DDP_CANARY && (h[x] & 0x3ffffu) >= 1 && (h[x] & 0x3ffffu) <= (uint32_t)d->nparams)
                code = (double)(h[x] & 0x3ffffu);
        vs_free(d->world, h);
    }
    vs_comm* c = vs_mesh_comm(d->mesh);
    double* dv = d->cu->drec; // (its record was read and zeroed: free as the all-reduce's buffer until it is restored)
    double keep = 0;
    if (!r) r = _vs_ddp_copy(d, &keep, dv, sizeof keep);
    if (!r) r = _vs_ddp_sync(d);
    if (!r) r = _vs_ddp_copy(d, dv, &code, sizeof code);
    if (!r) r = _vs_ddp_fence(d, c);
    if (!r) r = vs_all_reduce(c, dv, dv, 1, VS_F64, VS_OP_MAX, NULL);
    if (!r && vs_comm_device(c) == 1) r = vs_sync_stream(c, vs_comm_stream(c));
    if (!r) r = _vs_ddp_copy(d, &code, dv, sizeof code);
    if (!r) r = _vs_ddp_copy(d, dv, &keep, sizeof keep);
    if (!r) r = _vs_ddp_sync(d);
    if (!r && code >= 1) *param = (int)code - 1;
    return r;
#else
    (void)d;
    return VS_OK;
#endif
}

VS_API vs_result vs_ddp_clip_grad_norm_ex(vs_ddp* d, const vs_clip_desc* clip, double* norm)
{
    const char* fn = "vs_ddp_clip_grad_norm";
    if (!d || !clip) return vs_set_error(VS_ERR_NULL, "%s: %s is NULL", fn, d ? "clip desc" : "ddp");
    double max_norm = clip->max_norm, unscale = clip->unscale == 0 ? 1.0 : clip->unscale;
    if (!_vs_ddp_finite(max_norm))
        return vs_set_error(VS_ERR_INVALID, "%s: max_norm %g must be finite (> 0 clips, <= 0 only measures)", fn,
                            max_norm);
    if (!_vs_ddp_finite(unscale) || unscale <= 0)
        return vs_set_error(VS_ERR_INVALID, "%s: unscale %g must be finite and > 0 (0: none)", fn, clip->unscale);
    if (clip->ncarry < 0 || clip->ncarry > VS_CLIP_CARRY_MAX)
        return vs_set_error(VS_ERR_INVALID, "%s: ncarry %d must be 0 to %d (VS_CLIP_CARRY_MAX)", fn, clip->ncarry,
                            VS_CLIP_CARRY_MAX);
    if (clip->ncarry > 0 && !clip->carry_out)
        return vs_set_error(VS_ERR_NULL, "%s: carry_out is NULL with ncarry %d", fn, clip->ncarry);
    if (!d->finalized) return vs_set_error(VS_ERR_STATE, "%s: call vs_ddp_finalize first", fn);
    if (d->in_pass) return vs_set_error(VS_ERR_STATE, "%s: a backward pass is in progress (call vs_ddp_finish_grad_sync)", fn);
    if (!d->grads_pending) return vs_set_error(VS_ERR_STATE, "%s: no synchronized gradients (finish_grad_sync first)", fn);
    double ss = 0, ssc = 0; // the counted elements' sum of squares, and the copies'
    int bad = -1; // this rank's first parameter with a non-finite sum of squares (host path)
    vs_result r = VS_OK;
#ifdef _VS_DDP_CUDA
    if (d->cu) r = _vs_ddp_zero(d, d->cu->part, sizeof(double) * _VS_KPART_ALL);
#endif
    /* each element once: DP ranks count disjoint ranges, other dims per
       _vs_ddp_counted; the copies this rank does not count (a TP-replicated
       gradient off TP coordinate 0, a tied copy) are read in the same pass,
       for their finiteness only: a NaN that reached one copy alone would
       otherwise step that copy's parameter silently */
    for (int b = 0; b < d->nbuckets && !r; b++) {
        _vs_dbucket* k = &d->buckets[b];
        int64_t lo = k->shard * d->dp_rank, n = k->shard; // disjoint ranges, whatever the stage
        int64_t own_lo, own_n;
        _vs_ddp_owned(d, k, &own_lo, &own_n);
        float* g;
        r = _vs_ddp_owned_grad(d, k, own_lo, own_n, &g);
        for (int j = k->first; j < k->last && !r; j++) {
            _vs_dparam* q = &d->params[d->order[j]];
            int64_t a, e;
            if (!_vs_ddp_meet(q, lo, n, &a, &e)) continue;
            double* acc = q->counted ? &ss : &ssc;
            double before = *acc;
            float* gs = NULL;
            r = _vs_ddp_seg_grad(d, k, q, a, e, own_lo, g, &gs);
            if (!r) r = _vs_ddp_sumsq(d, gs, e - a, acc, !q->counted);
            if (bad < 0 && _vs_ddp_finite(before) && !_vs_ddp_finite(*acc)) bad = d->order[j];
        }
    }
    if (!r) r = _vs_ddp_sumsq_total(d, &ss, ssc, clip);
    if (!r) r = _vs_ddp_z3_written(d, fn);
    if (r) return r;
    double total = sqrt(ss) / unscale; // (the scaled gradients' norm, unscaled)
    if (norm) *norm = total;
    d->grad_norm = total;
    d->clipped = 1;
    if (!_vs_ddp_finite(total)) { // the same total on every rank: they all skip
        d->skip_next = 1;
        char where[200] = "", stale[400] = "";
        if (bad >= 0) snprintf(where, sizeof where, " (on this rank first in '%.150s')", d->params[bad].name);
        int src = -1; // (ZeRO-3 on a device: a collective of every rank, which all come here)
        vs_result rs = d->debug_params && d->desc.zero == VS_ZERO_3 ? _vs_ddp_z3_nan_source(d, &src) : VS_OK;
        if (rs) return rs;
        if (d->stale_read) // VESCALE_DEBUG=params: the likely cause
            snprintf(stale, sizeof stale, "; VESCALE_DEBUG=params: '%.150s'%s was still being all-gathered (its stale "
                     "part NaN) when the backward pass began: read before vs_ddp_wait_params", d->stale_read,
                     d->nstale > 1 ? " and others" : "");
        else if (src >= 0)
            snprintf(stale, sizeof stale, "; VESCALE_DEBUG=params: parameter '%.150s' of ready group %d was read after "
                     "vs_ddp_release(%d) (the NaN its released buffer holds reached the gradients)", d->params[src].name,
                     d->params[src].rgroup, d->params[src].rgroup);
        if (stale[0]) vs_log(d->world, VS_LOG_WARN, "%s: the gradient norm is %g%s", fn, total, stale);
        if (!clip->error_if_nonfinite) return VS_OK;
        return vs_set_error(VS_ERR_NONFINITE,
                            "%s: the total gradient norm is %g, not finite%s (error_if_nonfinite): gradients and "
                            "parameters left untouched, the next vs_ddp_step is skipped%s", fn, total, where, stale);
    }
    double coef = max_norm > 0 && total > max_norm ? max_norm / (total + 1e-6) : 1.0;
    if (coef == 1.0 && unscale == 1.0) return VS_OK;
    float scale = (float)(coef / unscale);
    for (int b = 0; b < d->nbuckets && !r; b++) {
        _vs_dbucket* k = &d->buckets[b];
        int64_t lo, n;
        _vs_ddp_owned(d, k, &lo, &n);
        if (k->acc_used)
            r = _vs_ddp_scale(d, k->grad_shard, VS_F32, n, scale);
        else if (!k->ext)
            r = _vs_ddp_scale(d, (char*)k->grad + (size_t)lo * _vs_dsz(k->gdtype), k->gdtype, n, scale);
        for (int j = k->first; j < k->last && !r && k->ext && !k->acc_used; j++) { // the trainer's, in place
            const _vs_dparam* q = &d->params[d->order[j]];
            r = _vs_ddp_scale(d, q->gext, k->gdtype, q->numel, scale);
        }
    }
    return r;
}

VS_API vs_result vs_ddp_clip_grad_norm(vs_ddp* d, double max_norm, double* norm)
{
    vs_clip_desc c;
    memset(&c, 0, sizeof c);
    c.max_norm = max_norm;
    return vs_ddp_clip_grad_norm_ex(d, &c, norm);
}

VS_API double vs_ddp_grad_norm(const vs_ddp* d)
{
    if (!d) {
        vs_set_error(VS_ERR_NULL, "vs_ddp_grad_norm: ddp is NULL");
        return -1;
    }
    return d->grad_norm;
}

/* vs_ddp_desc.finish_in_step / max_grad_norm: what vs_ddp_step does first, by
   the public calls themselves (so the results are theirs, bit for bit). */
_VS_DDP_PRIVATE vs_result _vs_ddp_step_prologue(vs_ddp* d)
{
    vs_result r = VS_OK;
    if (d->desc.finish_in_step && d->in_pass) r = vs_ddp_finish_grad_sync(d);
    if (!r && d->desc.max_grad_norm > 0 && d->grads_pending && !d->clipped)
        r = vs_ddp_clip_grad_norm(d, d->desc.max_grad_norm, NULL);
    return r ? vs_set_error(r, "vs_ddp_step: %s", vs_last_error()) : VS_OK;
}

_VS_DDP_PRIVATE void _vs_ddp_group(const vs_ddp* d, const _vs_dparam* q, double lr, double* glr, double* gwd)
{
    const vs_optim_desc* o = &d->desc.optim;
    double scale = 1.0, wd = o->weight_decay;
    if (q->group > 0) {
        scale = o->groups[q->group].lr_scale; // resolved by vs_ddp_init
        wd = o->groups[q->group].weight_decay;
    }
    *glr = lr * scale;
    *gwd = q->no_decay ? 0.0 : wd;
}

/* VESCALE_DEBUG=params on a device: bucket k's stale ranges filled with NaN
   (all-ones bytes: a NaN in f32, bf16 and f16) on the DDP's stream, where the
   gathered values then land; a read not ordered after them sees NaN. */
_VS_DDP_PRIVATE vs_result _vs_ddp_poison_range(vs_ddp* d, _vs_dparam* q, char* lo, char* hi)
{
    (void)q;
    _VS_DDP_DEV(d, cudaMemsetAsync(lo, 0xff, (size_t)(hi - lo), _vs_ddp_stream(d)));
    (void)lo, (void)hi;
    return VS_OK;
}

/* A ZeRO all-gather through a staging buffer (_vs_ddp_staged_gather): the owned
   range packed in, gathered in place there, and written into the parameters by
   _vs_ddp_params_ready: at once on a device (in stream order) or without a
   handle; else when waited for, the stale pages guarded meanwhile under
   VESCALE_DEBUG=params. */
_VS_DDP_PRIVATE vs_result _vs_ddp_gather_staged(vs_ddp* d, int b, vs_work** wp)
{
    _vs_dbucket* k = &d->buckets[b];
    int64_t lo, n;
    _vs_ddp_owned(d, k, &lo, &n);
    size_t pz = _vs_dsz(k->pdtype);
    void* buf = NULL;
    vs_result r = _vs_ddp_pool_take(d, -2 - b, 0, &buf);
    for (int j = k->first; j < k->last && !r; j++) {
        const _vs_dparam* q = &d->params[d->order[j]];
        int64_t a, e;
        if (_vs_ddp_meet(q, lo, n, &a, &e))
            r = _vs_ddp_copy(d, (char*)buf + (size_t)a * pz, _vs_ddp_pat(k, q, a), (size_t)(e - a) * pz);
    }
    if (r) return r;
    k->gbuf = buf;
    if (d->debug_params) {
        r = _vs_ddp_each_stale(d, k, d->cu ? _vs_ddp_poison_range : _vs_ddp_guard_range);
        k->guarded = !d->cu;
    }
    vs_comm* c = vs_mesh_comm(d->dp);
    if (!r) r = _vs_ddp_fence(d, c);
    if (!r) r = vs_all_gather(c, (char*)buf + (size_t)lo * pz, buf, (size_t)k->shard, k->pdtype, wp);
    if (!r && (d->cu || !wp)) r = _vs_ddp_params_ready(d, b);
    return r;
}

/* A trainer-owned bucket's ZeRO all-gather in place, with no staging, one group
   a bucket (the mirror of the grouped reduce in _vs_ddp_launch): each piece of
   a parameter is sent by the DP rank that owns it to every other, where it
   lands in place.
   - Point-to-point, since a piece has one source: on threads a pair matches
     without a rendezvous of all ranks (NCCL's all-gather is sends and receives
     too). Every rank posts in the same order, so each pair's messages match in
     order.
   - Nothing here waits: the group runs while the trainer goes on, and
     _vs_ddp_params_ready (vs_ddp_wait_params, vs_ddp_param) completes it.
   - On a device under VESCALE_DEBUG=params the stale pieces are NaN until
     their values land. */
_VS_DDP_PRIVATE vs_result _vs_ddp_gather_grouped(vs_ddp* d, int b, vs_work** wp)
{
    _vs_dbucket* k = &d->buckets[b];
    vs_comm* c = vs_mesh_comm(d->dp);
    vs_result r = VS_OK;
    if (d->debug_params && d->cu) {
        r = _vs_ddp_each_stale(d, k, _vs_ddp_poison_range);
        if (!r) r = _vs_ddp_fence(d, c); // the poison before the values
    }
    if (r || (r = vs_group_start(c))) return r;
    size_t pz = _vs_dsz(k->pdtype);
    for (int j = k->first; j < k->last && !r; j++) {
        const _vs_dparam* q = &d->params[d->order[j]];
        for (int o = 0; o < d->dp_size && !r; o++) {
            int64_t a, e;
            if (!_vs_ddp_meet(q, k->shard * o, k->shard, &a, &e)) continue;
            char* at = (char*)q->pext + (size_t)(a - q->offset) * pz;
            if (o != d->dp_rank) {
                r = vs_recv(c, at, (size_t)(e - a), k->pdtype, o, NULL);
                continue;
            }
            for (int p = 0; p < d->dp_size && !r; p++)
                if (p != o) r = vs_send(c, at, (size_t)(e - a), k->pdtype, p, NULL);
        }
    }
    vs_result re = vs_group_end(c, r ? NULL : wp);
    return r ? r : re;
}

VS_API vs_result vs_ddp_step(vs_ddp* d, double lr)
{
    const char* fn = "vs_ddp_step";
    if (!d) return vs_set_error(VS_ERR_NULL, "%s: ddp is NULL", fn);
    if (!d->finalized) return vs_set_error(VS_ERR_STATE, "%s: call vs_ddp_finalize first", fn);
    if (!_vs_ddp_finite(lr) || lr < 0) return vs_set_error(VS_ERR_INVALID, "%s: lr %g must be finite and >= 0", fn, lr);
    vs_result r0 = _vs_ddp_step_prologue(d); // (after the lr check: a refused step changes nothing)
    if (r0) return r0;
    if (d->in_pass) return vs_set_error(VS_ERR_STATE, "%s: gradient sync not finished (call vs_ddp_finish_grad_sync)", fn);
    if (!d->grads_pending) return vs_set_error(VS_ERR_STATE, "%s: no synchronized gradients since the last step", fn);
    for (int b = 0; b < d->nbuckets; b++) {
        vs_result rw = _vs_ddp_params_ready(d, b);
        if (rw) return rw;
    }
    if (d->desc.zero == VS_ZERO_3) { // the gathered copies become stale: none may be held
        vs_result rz = _vs_ddp_z3_step_begin(d);
        if (!rz) rz = _vs_ddp_zpool_size(d); // (the first step's end: nothing in flight, nothing held)
        if (rz) return rz;
    }
    if (d->skip_next) { // a non-finite gradient norm: every rank skips (nothing to gather)
        d->skip_next = 0;
        d->grads_pending = 0;
        d->skipped++;
        if (d->desc.zero == VS_ZERO_3) {
            vs_result rz = _vs_ddp_z3_step_end(d);
            if (rz) return rz;
        }
        // (a training state's DDP: vs_train_step says it once, naming the step; this is detail)
        vs_log(d->world, d->owner ? VS_LOG_INFO : VS_LOG_WARN,
               "vs_ddp_step: step skipped: the gradient norm was not finite (%lld skipped)",
               (long long)d->skipped);
        return VS_OK;
    }
    const vs_optim_desc* o = &d->desc.optim;
    int64_t t = ++d->steps;
    double bc1 = 1.0 - pow(o->beta1, (double)t), bc2 = 1.0 - pow(o->beta2, (double)t);
    vs_result r = VS_OK;
    for (int b = 0; b < d->nbuckets && !r; b++) {
        _vs_dbucket* k = &d->buckets[b];
        int64_t lo, n;
        _vs_ddp_owned(d, k, &lo, &n);
        float* g;
        r = _vs_ddp_owned_grad(d, k, lo, n, &g);
        for (int j = k->first; j < k->last && !r; j++) {
            _vs_dparam* q = &d->params[d->order[j]];
            int64_t a, e;
            if (!_vs_ddp_meet(q, lo, n, &a, &e)) continue;
            double glr, gwd;
            _vs_ddp_group(d, q, lr, &glr, &gwd);
            if (glr == 0 && o->kind != VS_OPTIM_CUSTOM) continue; // frozen: parameters and state stay
            int64_t m = e - a, s0 = a - lo; // s0: index into the owned range
            float* p = k->master ? k->master + s0 : (float*)_vs_ddp_pat(k, q, a);
            float* gs = NULL;
            if ((r = _vs_ddp_seg_grad(d, k, q, a, e, lo, g, &gs))) break;
            const float* gr = gs;
            float* m1 = k->state[0] ? k->state[0] + s0 : NULL;
            float* m2 = k->state[1] ? k->state[1] + s0 : NULL;
            if (o->kind == VS_OPTIM_ADAMW) {
                // (1 - beta) in double, then rounded: the same betas as the bias correction
                float b1 = (float)o->beta1, b2 = (float)o->beta2, eps = (float)o->eps;
                float omb1 = (float)(1.0 - o->beta1), omb2 = (float)(1.0 - o->beta2);
                float step = (float)(glr / bc1), c2 = (float)(1.0 / sqrt(bc2)), decay = (float)(1.0 - glr * gwd);
                long long mm = m;
                void* args[] = {&p, &gr, &m1, &m2, &mm, &b1, &b2, &omb1, &omb2, &step, &c2, &eps, &decay};
                if (d->cu)
                    r = _vs_ddp_kernel(d, _VS_KI_ADAMW, m, args);
                else
                    _vs_hk_adamw(p, gr, m1, m2, mm, b1, b2, omb1, omb2, step, c2, eps, decay);
            } else if (o->kind == VS_OPTIM_SGD) {
                float mu = (float)o->momentum, lrf = (float)glr, wdf = (float)gwd;
                long long mm = m;
                int nest = o->nesterov != 0;
                void* args[] = {&p, &gr, &m1, &mm, &mu, &lrf, &wdf, &nest};
                if (d->cu)
                    r = _vs_ddp_kernel(d, _VS_KI_SGD, m, args);
                else
                    _vs_hk_sgd(p, gr, m1, mm, mu, lrf, wdf, nest);
            } else {
                vs_step_args sa;
                memset(&sa, 0, sizeof sa);
                sa.name = q->name;
                sa.index = d->order[j];
                sa.offset = a - q->offset;
                sa.n = m;
                sa.param = p;
                sa.grad = gr;
                sa.state[0] = m1;
                sa.state[1] = m2;
                sa.lr = glr;
                sa.weight_decay = gwd;
                sa.step = t;
                sa.user = o->user;
#ifdef _VS_DDP_CUDA
                if (d->cu) sa.stream = (void*)d->cu->stream;
#endif
                r = o->step(&sa);
            }
        }
        if (k->master && !r && !k->ext) // write the rounded master weights into the owned parameters
            r = _vs_ddp_from_f32(d, (char*)k->param + (size_t)(lo - k->pbase) * _vs_dsz(k->pdtype), k->pdtype, k->master, n);
        for (int j = k->first; j < k->last && !r && k->master && k->ext; j++) { // (the trainer's: each its part)
            _vs_dparam* q = &d->params[d->order[j]];
            int64_t a, e;
            if (_vs_ddp_meet(q, lo, n, &a, &e))
                r = _vs_ddp_from_f32(d, _vs_ddp_pat(k, q, a), k->pdtype, k->master + (a - lo), e - a);
        }
    }
    /* one DP rank and one replica (solo): a rank's range is the whole bucket,
       which the update just wrote in place, so every gather below is the
       identity (a staged one packs the parameters and writes them back
       unchanged): none is made */
    const int gather = d->desc.zero != VS_ZERO_0 && d->desc.zero != VS_ZERO_3 && !d->solo;
    if (!r && gather) r = _vs_ddp_fence(d, vs_mesh_comm(d->dp)); // the update before the gathers
    if (r) return r;
    // ZeRO: every rank gets the updated ranges of the others (in place), the
    // first layers' buckets first, as the next forward reads them; nothing
    // waits here: vs_ddp_param waits for its bucket and vs_ddp_wait_params
    // for all, so the gathers overlap whatever the trainer does meanwhile
    if (d->desc.zero == VS_ZERO_3) r = _vs_ddp_z3_step_end(d); // (no gathers: the groups' prefetch instead)
    if (gather)
        for (int b = d->nbuckets - 1; b >= 0 && !r; b--) {
            _vs_dbucket* k = &d->buckets[b];
            size_t pz = _vs_dsz(k->pdtype);
            vs_work** wp = d->desc.no_overlap && !d->cu ? NULL : &k->pwork;
            if (_vs_ddp_staged_gather(d, k)) {
                r = _vs_ddp_gather_staged(d, b, wp);
                continue;
            }
            if (k->ext) {
                r = _vs_ddp_gather_grouped(d, b, wp);
                continue;
            }
            void* mine = (char*)k->param + (size_t)(k->shard * d->dp_rank) * pz;
            if (d->debug_params && d->cu) r = _vs_ddp_each_stale(d, k, _vs_ddp_poison_range); // (the gather writes over it)
            if (!r) r = vs_all_gather(vs_mesh_comm(d->dp), mine, k->param, (size_t)k->shard, k->pdtype, wp);
        }
    d->grads_pending = 0;
    return r;
}

VS_API int64_t vs_ddp_step_count(const vs_ddp* d)
{
    return d ? d->steps : vs_set_error(VS_ERR_NULL, "vs_ddp_step_count: ddp is NULL");
}
VS_API vs_result vs_ddp_set_step_count(vs_ddp* d, int64_t n)
{
    if (!d) return vs_set_error(VS_ERR_NULL, "vs_ddp_set_step_count: ddp is NULL");
    if (n < 0) return vs_set_error(VS_ERR_INVALID, "vs_ddp_set_step_count: n = %lld (>= 0)", (long long)n);
    d->steps = n;
    return VS_OK;
}
VS_API int64_t vs_ddp_skipped_steps(const vs_ddp* d)
{
    return d ? d->skipped : vs_set_error(VS_ERR_NULL, "vs_ddp_skipped_steps: ddp is NULL");
}

/* vs_ddp_memory.tables: what DDP allocated for its bookkeeping, as it did. */
_VS_DDP_PRIVATE size_t _vs_ddp_tables(const vs_ddp* d)
{
    size_t n = sizeof(vs_ddp) + (size_t)d->cap * sizeof(_vs_dparam);
    for (int i = 0; i < d->nparams; i++) n += strlen(d->params[i].name) + 1;
    if (d->order) n += (size_t)d->nparams * (sizeof(int) + sizeof(_vs_dbucket)); // (one a parameter at most)
    if (d->pool) n += (size_t)d->npool * (sizeof(void*) + sizeof(int));
    n += (size_t)d->nzpool * (sizeof(void*) + sizeof(int)) + (size_t)(d->capzorder + d->capzheld) * sizeof(int);
#ifdef _VS_DDP_CUDA
    if (d->cu) n += sizeof(_vs_dcuda);
#endif
    return n;
}

VS_API vs_result vs_ddp_memory_usage(const vs_ddp* d, vs_ddp_memory* out)
{
    if (!d || !out) return vs_set_error(VS_ERR_NULL, "vs_ddp_memory_usage: %s is NULL", d ? "out" : "ddp");
    memset(out, 0, sizeof *out);
    for (int b = 0; b < d->nbuckets; b++) {
        const _vs_dbucket* k = &d->buckets[b];
        int64_t first, own;
        _vs_ddp_owned(d, k, &first, &own);
        int64_t used = 0;
        for (int j = k->first; j < k->last; j++) used += d->params[d->order[j]].numel;
        out->padding += (size_t)(k->numel - used);
        // (trainer-owned storage: not DDP's; ZeRO-3: the owned range)
        if (!k->ext && !k->pown) out->params += (size_t)(d->desc.zero == VS_ZERO_3 ? own : k->numel) * _vs_dsz(k->pdtype);
        if (d->desc.zero < VS_ZERO_2 && !k->ext) out->grads += (size_t)k->numel * _vs_dsz(k->gdtype);
        if (k->acc) out->grads += (size_t)own * sizeof(float);
        if (k->master) out->master += (size_t)own * sizeof(float);
        for (int s = 0; s < 2; s++)
            if (k->state[s]) out->optim_state += (size_t)own * sizeof(float);
    }
    out->grad_staging = (size_t)d->npool * d->pool_bytes;
    out->grads += out->grad_staging; // the staging pool
    out->gathered = (size_t)d->nzpool * d->zpool_bytes;
    if (d->scratch) out->scratch = sizeof(float) * (size_t)(d->max_bucket / (d->desc.zero == VS_ZERO_3 ? d->dp_size : 1));
#ifdef _VS_DDP_CUDA
    if (d->cu) out->scratch += sizeof(double) * (_VS_KPART_ALL + 1); // (its part and norm)
#endif
    out->tables = _vs_ddp_tables(d);
    return VS_OK;
}

/* Introspection: the resolved desc, each parameter's layout and owned range,
   the owned synchronized gradient and the optimizer state (checkpoints). */

VS_API vs_result vs_ddp_query_desc(const vs_ddp* d, vs_ddp_desc* out)
{
    if (!d || !out) return vs_set_error(VS_ERR_NULL, "vs_ddp_query_desc: %s is NULL", d ? "out" : "ddp");
    *out = d->desc; // resolved by vs_ddp_init (_vs_ddp_desc_defaults)
    return VS_OK;
}

/* q's owned flat range [*begin, *end) (the owned range of its bucket clamped to
   q: empty ranges sit at 0 or numel), and *at, the index of *begin in the
   bucket's owned range (0 when empty). After finalize. */
_VS_DDP_PRIVATE void _vs_ddp_param_owned(const vs_ddp* d, const _vs_dparam* q, int64_t* begin, int64_t* end, int64_t* at)
{
    int64_t lo, n;
    _vs_ddp_owned(d, &d->buckets[q->bucket], &lo, &n);
    int64_t b = lo - q->offset, e = lo + n - q->offset;
    b = b < 0 ? 0 : b > q->numel ? q->numel : b;
    e = e < b ? b : e > q->numel ? q->numel : e;
    *begin = b;
    *end = e;
    *at = b < e ? q->offset + b - lo : 0;
}

VS_API vs_result vs_ddp_query_param_info(const vs_ddp* d, int i, vs_ddp_param_info* out)
{
    const char* fn = "vs_ddp_query_param_info";
    if (!d || !out) return vs_set_error(VS_ERR_NULL, "%s: %s is NULL", fn, d ? "out" : "ddp");
    memset(out, 0, sizeof *out);
    if (i < 0 || i >= d->nparams)
        return vs_set_error(VS_ERR_INVALID, "%s: parameter index %d out of range [0, %d)", fn, i, d->nparams);
    const _vs_dparam* q = &d->params[i];
    out->name = q->name;
    out->index = i;
    out->dtype = q->dtype;
    out->grad_dtype = q->gdtype;
    out->ndim = q->ndim;
    for (int k = 0; k < q->ndim; k++) {
        out->shape[k] = q->shape[k];
        out->local_shape[k] = q->lshape[k];
        out->offset[k] = q->loff[k];
    }
    memcpy(out->placements, q->pl, sizeof out->placements);
    out->numel = 1;
    for (int k = 0; k < q->ndim; k++) out->numel *= q->shape[k]; // fits: vs_ddp_add_param checked it
    out->local_numel = q->numel;
    out->group = q->group;
    out->no_decay = q->no_decay;
    out->has_master = q->dtype != VS_F32;
    // one copy per element: the DP dim counts only under ZeRO-0, where every DP rank owns everything
    out->primary = _vs_ddp_counted(d, q) && (d->desc.zero != VS_ZERO_0 || vs_mesh_coord_along(d->mesh, vs_mesh_dim_name(d->mesh, d->dp_index)) == 0);
    if (!d->finalized) {
        out->bucket = -1;
        out->bucket_offset = out->owned_begin = out->owned_end = out->owned_offset = -1;
        return VS_OK;
    }
    out->bucket = q->bucket;
    out->bucket_offset = q->offset;
    _vs_ddp_param_owned(d, q, &out->owned_begin, &out->owned_end, &out->owned_offset);
    return VS_OK;
}

VS_API vs_result vs_ddp_grad_synced_owned(vs_ddp* d, int i, vs_ddp_span* out)
{
    const char* fn = "vs_ddp_grad_synced_owned";
    if (!out) return vs_set_error(VS_ERR_NULL, "%s: out is NULL", fn);
    memset(out, 0, sizeof *out);
    vs_result r = _vs_ddp_check_index(fn, d, i);
    if (r) return r;
    const _vs_dparam* q = &d->params[i];
    const _vs_dbucket* k = &d->buckets[q->bucket];
    if (d->in_pass)
        return vs_set_error(VS_ERR_STATE, "%s: '%s': a backward pass is in progress (call vs_ddp_finish_grad_sync)", fn,
                            q->name);
    if (!d->synced)
        return vs_set_error(VS_ERR_STATE,
                            "%s: '%s': no synchronized gradients (none since vs_ddp_zero_grad, or the last backward "
                            "pass ran with vs_ddp_set_sync(d, 0))", fn, q->name);
    int64_t at;
    _vs_ddp_param_owned(d, q, &out->begin, &out->end, &at);
    if (k->acc_used) { // ZeRO-2, or several synced passes: the f32 accumulator of the owned range
        out->dtype = VS_F32;
        out->data = out->begin < out->end ? (void*)(k->grad_shard + at) : NULL;
    } else {
        out->dtype = k->gdtype;
        out->data = out->begin < out->end ? _vs_ddp_gat(k, q, q->offset + out->begin) : NULL;
    }
    return VS_OK;
}

VS_API vs_result vs_ddp_param_owned(vs_ddp* d, int i, vs_ddp_span* out)
{
    const char* fn = "vs_ddp_param_owned";
    if (!out) return vs_set_error(VS_ERR_NULL, "%s: out is NULL", fn);
    memset(out, 0, sizeof *out);
    vs_result r = _vs_ddp_check_index(fn, d, i);
    if (r) return r;
    const _vs_dparam* q = &d->params[i];
    int64_t at;
    _vs_ddp_param_owned(d, q, &out->begin, &out->end, &at);
    out->dtype = q->dtype;
    if (out->begin == out->end) return VS_OK;
    if (d->desc.zero != VS_ZERO_3 && (r = _vs_ddp_params_ready(d, q->bucket))) return r; // (a ZeRO-1 gather writes it)
    out->data = _vs_ddp_pat(&d->buckets[q->bucket], q, q->offset + out->begin);
    return VS_OK;
}

VS_API vs_result vs_ddp_owned_rewrite(vs_ddp* d, int drop)
{
    const char* fn = "vs_ddp_owned_rewrite";
    if (!d) return vs_set_error(VS_ERR_NULL, "%s: ddp is NULL", fn);
    if (drop != 0 && drop != 1) return vs_set_error(VS_ERR_INVALID, "%s: drop %d (0 or 1)", fn, drop);
    if (!d->finalized || d->desc.zero != VS_ZERO_3) return VS_OK;
    if (!drop) return d->zrecorded ? _vs_ddp_z3_prefetch(d, d->zpos, 0) : VS_OK; // (what the step would have issued)
    for (int b = 0; b < d->nbuckets; b++)
        if (d->buckets[b].zstate == _VS_Z3_HELD)
            return vs_set_error(VS_ERR_STATE, "%s: group %d is gathered: vs_ddp_release it first (its views hold the "
                                "values about to be replaced)", fn, d->buckets[b].rgroup);
    vs_result r = VS_OK;
    for (int b = 0; b < d->nbuckets; b++) {
        vs_result rb = d->buckets[b].zstate == _VS_Z3_REST ? VS_OK : _vs_ddp_z3_drop(d, b);
        if (!r) r = rb;
    }
    return r;
}

VS_API vs_result vs_ddp_write_param(vs_ddp* d, int i, const void* data)
{
    const char* fn = "vs_ddp_write_param";
    vs_result r = _vs_ddp_check_index(fn, d, i);
    if (r) return r;
    if (!data) return vs_set_error(VS_ERR_NULL, "%s: data is NULL", fn);
    const _vs_dparam* q = &d->params[i];
    _vs_dbucket* k = &d->buckets[q->bucket];
    if (d->in_pass) return vs_set_error(VS_ERR_STATE, "%s: '%s' during a backward pass: write it between steps", fn, q->name);
    int z3 = d->desc.zero == VS_ZERO_3;
    if (z3) _vs_ddp_z3_unkeep(d, q->rgroup, 0);
    if (z3 && (k->zstate == _VS_Z3_HELD || k->zstate == _VS_Z3_KEPT))
        return vs_set_error(VS_ERR_STATE, "%s: '%s': its ready group %d is gathered: write it between its uses", fn,
                            q->name, q->rgroup);
    if (z3 && k->zstate == _VS_Z3_FLIGHT)
        r = _vs_ddp_z3_drop(d, q->bucket); // (a stale prefetched copy)
    else
        r = _vs_ddp_params_ready(d, q->bucket); // (a gather in flight reads or writes it)
    if (r) return r;
    int64_t lo, cnt, a = q->offset, e = q->offset + q->numel, ma, me;
    _vs_ddp_owned(d, k, &lo, &cnt);
    size_t pz = _vs_dsz(q->dtype);
    if ((!z3 || _vs_ddp_meet(q, lo, cnt, &a, &e)) && a < e)
        r = _vs_ddp_copy(d, _vs_ddp_pat(k, q, a), (const char*)data + (size_t)(a - q->offset) * pz, (size_t)(e - a) * pz);
    if (!r && k->master && _vs_ddp_meet(q, lo, cnt, &ma, &me))
        r = _vs_ddp_to_f32(d, k->master + (ma - lo), _vs_ddp_pat(k, q, ma), q->dtype, me - ma);
    if (!r) r = _vs_ddp_sync(d); // (data may go on return)
    return r ? vs_set_error(r, "%s: '%s': %s", fn, q->name, vs_last_error()) : VS_OK;
}

_VS_DDP_PRIVATE const char* _vs_ddp_state_name(vs_ddp_state s)
{
    switch (s) {
    case VS_DDP_STATE_MASTER: return "MASTER";
    case VS_DDP_STATE_EXP_AVG: return "EXP_AVG";
    case VS_DDP_STATE_EXP_AVG_SQ: return "EXP_AVG_SQ";
    case VS_DDP_STATE_MOMENTUM: return "MOMENTUM";
    case VS_DDP_STATE_CUSTOM0: return "CUSTOM0";
    case VS_DDP_STATE_CUSTOM1: return "CUSTOM1";
    case VS_DDP_STATE_NONE: break;
    }
    return "NONE";
}

VS_API int vs_ddp_has_optim_state(const vs_ddp* d, int i, vs_ddp_state which)
{
    vs_result r = _vs_ddp_check_index("vs_ddp_has_optim_state", d, i);
    if (r) return r;
    if (which < VS_DDP_STATE_MASTER || which > VS_DDP_STATE_CUSTOM1)
        return vs_set_error(VS_ERR_INVALID, "vs_ddp_has_optim_state: unknown state %d", (int)which);
    const _vs_dbucket* k = &d->buckets[d->params[i].bucket];
    vs_optim_kind kind = d->desc.optim.kind;
    switch (which) {
    case VS_DDP_STATE_MASTER: return k->master != NULL;
    case VS_DDP_STATE_EXP_AVG:
    case VS_DDP_STATE_EXP_AVG_SQ: return kind == VS_OPTIM_ADAMW && k->state[which == VS_DDP_STATE_EXP_AVG_SQ] != NULL;
    case VS_DDP_STATE_MOMENTUM: return kind == VS_OPTIM_SGD && k->state[0] != NULL;
    case VS_DDP_STATE_CUSTOM0:
    case VS_DDP_STATE_CUSTOM1: return kind == VS_OPTIM_CUSTOM && k->state[which == VS_DDP_STATE_CUSTOM1] != NULL;
    default: return 0;
    }
}

VS_API vs_result vs_ddp_optim_state(vs_ddp* d, int i, vs_ddp_state which, vs_ddp_span* out)
{
    const char* fn = "vs_ddp_optim_state";
    if (!out) return vs_set_error(VS_ERR_NULL, "%s: out is NULL", fn);
    memset(out, 0, sizeof *out);
    vs_result r = _vs_ddp_check_index(fn, d, i);
    if (r) return r;
    const _vs_dparam* q = &d->params[i];
    const _vs_dbucket* k = &d->buckets[q->bucket];
    vs_optim_kind kind = d->desc.optim.kind;
    const char* kname = kind == VS_OPTIM_ADAMW ? "AdamW" : kind == VS_OPTIM_SGD ? "SGD" : "a custom optimizer";
    float* base = NULL;
    const char* need = NULL; // why the state does not exist
    switch (which) {
    case VS_DDP_STATE_MASTER:
        base = k->master;
        need = "bf16/f16 parameters (f32 parameters are stepped in place: read them with vs_ddp_param)";
        break;
    case VS_DDP_STATE_EXP_AVG:
    case VS_DDP_STATE_EXP_AVG_SQ:
        base = kind == VS_OPTIM_ADAMW ? k->state[which == VS_DDP_STATE_EXP_AVG_SQ] : NULL;
        need = "AdamW";
        break;
    case VS_DDP_STATE_MOMENTUM:
        base = kind == VS_OPTIM_SGD ? k->state[0] : NULL;
        need = "SGD with momentum > 0";
        break;
    case VS_DDP_STATE_CUSTOM0:
    case VS_DDP_STATE_CUSTOM1:
        base = kind == VS_OPTIM_CUSTOM ? k->state[which == VS_DDP_STATE_CUSTOM1] : NULL;
        need = "VS_OPTIM_CUSTOM";
        break;
    case VS_DDP_STATE_NONE:
        break;
    }
    if (!need)
        return vs_set_error(VS_ERR_INVALID, "%s: '%s': unknown state %d (VS_DDP_STATE_MASTER..VS_DDP_STATE_CUSTOM1)", fn,
                            q->name, (int)which);
    if (!base)
        return vs_set_error(VS_ERR_INVALID, "%s: '%s' (%s) has no %s state with %s: it is kept only for %s", fn, q->name,
                            vs_dtype_name(q->dtype), _vs_ddp_state_name(which), kname, need);
    int64_t at;
    _vs_ddp_param_owned(d, q, &out->begin, &out->end, &at);
    out->dtype = VS_F32;
    out->data = out->begin < out->end ? (void*)(base + at) : NULL;
    return VS_OK;
}

VS_API vs_result vs_ddp_free(vs_ddp* d)
{
    if (!d) return VS_OK;
    if (d->owner)
        return vs_set_error(VS_ERR_STATE, "vs_ddp_free: this DDP belongs to %s, which frees it; it is left as it was",
                            d->owner);
    _vs_ddp_release(d); // waits for the collectives in flight first
    _vs_ddp_mesh_use(d->mesh, -1);
    for (int i = 0; i < d->nparams; i++) {
        vs_free(d->world, d->params[i].name);
        vs_free(d->world, d->params[i].init);
    }
    vs_world* w = d->world;
    vs_mesh* own = d->own_mesh ? d->mesh : NULL; // (made for vs_ddp_desc.world)
    vs_free(w, d->params);
    vs_free(w, d);
    return vs_mesh_free(own);
}

#ifdef __cplusplus
}
#endif
#endif // VESCALE_DDP_IMPLEMENTATION

/* vescale_ddp.h - MIT License

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
