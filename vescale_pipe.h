/* vescale_pipe.h - v0.1.0 (2026-11-23) - pipeline parallelism: the model as units, stage splits, schedules as data (GPipe, 1F1B, interleaved, ZB-H1, ZB-V, DualPipeV, your own), a validator, a simulator, and the engine that runs a schedule bit for bit equal to one device.

   Do this in *one* C or C++ file:
       #define VESCALE_IMPLEMENTATION        (every part), or
       #define VESCALE_PIPE_IMPLEMENTATION   (this part only; the mesh
                                              implementation must then be
                                              enabled somewhere as well)
       #include "vescale_pipe.h"
   (VESCALE_STATIC, see vescale_mesh.h, implies the implementation.)

   Platforms and link lines: as vescale_mesh.h (POSIX.1-2008 + pthreads;
   -lpthread -lm; -lmpi with VESCALE_MPI; -lcudart -lnccl -lnvrtc with
   VESCALE_NCCL, where the engine's buffers are device memory). MIT license
   (end of file).

   Step by step (4 thread ranks, one stage each; the whole program is
   examples/pipe_mlp.c, which also checks the result against one rank):

       // 1. The model as units: named tensors in and out, a forward, a backward
       //    (or backward_input + backward_weight for zero-bubble schedules).
       vs_pipe_unit units[9] = {
           { .name = "l0", .inputs = "x", .outputs = "h0:f32[*,64]", .forward = lin_fwd,
             .backward_input = lin_bwd_in, .backward_weight = lin_bwd_w, .user = &layer[0], .flops = 1 },
           ...
           { .name = "loss", .inputs = "h7,target", .outputs = "loss:f32[]", .forward = mse_fwd,
             .backward = mse_bwd, .flops = 1 },
       };

       static int train(vs_world* w, void* arg) {
           vs_mesh* mesh;                              // PP x DP x TP works the same
           vs_mesh_init(w, &(vs_mesh_desc){ .shape = {4}, .dim_names = {"PP"} }, &mesh);
           vs_pipe_plan plan;                          // 2. where to cut: 4 stages x 2 chunks, V-shaped
           vs_pipe_split(units, 9, &(vs_pipe_split_desc){ .stages = 4, .chunks = 2,
                         .kind = VS_PIPE_SPLIT_FLOPS, .placement = VS_PIPE_PLACE_V }, &plan);
           vs_pipe* pipe;                              // 3. the engine (collective)
           vs_pipe_init(&(vs_pipe_desc){ .mesh = mesh, .units = units, .nunits = 9, .plan = &plan,
                        .data = load_batch, .on_step = adamw_step, .hook_user = arg }, &pipe);

           vs_pipe_sched* sched;                       // 4. a schedule: built in, or parsed from text
           vs_pipe_generate(w, VS_PIPE_ZBV, 4, 2, 8, &sched);      // 8 microbatches
           for (int step = 0; step < 100; step++) {
               double loss;
               vs_pipe_run(pipe, sched, &loss);        // one minibatch; the loss on every stage
           }
           vs_pipe_sched_free(sched); vs_pipe_free(pipe); vs_mesh_free(mesh);
           return 0;
       }
       int main(void) { return vs_launch(4, train, NULL) == VS_OK ? 0 : 1; }

   Topics (grep the markers):
       // >>pipe-model   units, named tensors and their specs, the callbacks' contract
       // >>pipe-split   stage construction: manual points or balanced by cost, groups, placement
       // >>pipe-sched   schedules as instruction lists, their text form, add_comm, the validator
       // >>pipe-gen     the built-in schedule generators (any M >= 1)
       // >>pipe-sim     the simulator (makespan, bubble, memory), text timelines, Chrome traces
       // >>pipe-engine  the engine: vs_pipe_init, vs_pipe_run, hooks, unit hooks, tied gradients, query_desc

   Bit for bit equal to one device. The engine reproduces, byte for byte, this
   loop on one rank, for each microbatch m in order:
   - every unit's forward in model order;
   - gradients zeroed, the loss's gradient seeded (1/M for a mean loss, 1 for
     a sum), every unit's backward in reverse order, each ADDING into its
     inputs' gradients and its own parameter gradients;
   - the minibatch loss: the microbatch losses summed in order (as doubles),
     divided by M for a mean.

   The validator enforces what this needs of a schedule: each chunk's
   backwards and weight gradients run in increasing microbatch order, so a
   parameter's gradient sums microbatches in the same order. Activations cross
   stages as exact copies; nothing is reduced in another order.

   Tensors. A unit's inputs and outputs are comma-separated names with optional
   specs ("h:f32[*,64]", "loss:f32[]"). An input names any earlier unit's output
   (a skip connection may cross several stages: the engine carries it through
   the stages between) or a data input, which the data callback makes on
   whichever stage needs it (each stage loads only what its units take).

   Shapes may change from one microbatch to the next: the receiving stage
   learns them from the message (or, with vs_pipe_desc.fixed_shapes, from the
   first run). Specs that disagree between producer and consumer are an error at
   vs_pipe_init; a tensor that breaks its spec at run time is an error
   naming the unit and tensor.

   Communication. Between two stages each direction has its own 2-rank
   communicator (split from the PP communicator at vs_pipe_init), so a send
   waiting for its receiver never holds up a receive: point-to-point is ordered
   per communicator, on threads as on NCCL. Sends are asynchronous (a copy of
   the tensors goes out, so the stage's memory can be let go at once); receives
   wait for the header (received ahead, as soon as the previous message on the
   link was taken).

   Each message carries a header (the chunk, microbatch, tensor ids, dtypes
   and shapes) that the receiver checks against its schedule, so stages
   running different schedules get VS_ERR_MISMATCH, never wrong data.

   On NCCL the host waits for nothing of the device but what it must read:
   - each link runs on its own stream, ordered after the compute stream by an
     event;
   - the compute stream, not the host, waits for each receive (vs_wait_stream:
     the watchdog gives it its deadline), and for each send before its buffer
     is reused (Buffers, below);
   - gradients come without a header (the receiver holds the activations:
     their shapes); activations too with vs_pipe_desc.fixed_shapes, from a
     microbatch's second run on (the sender checks the promise);
   - otherwise the receiving host waits for the header of each activation
     message (pinned memory, received ahead): the shapes the callbacks get are
     host values;
   - at the run's end the last stage broadcasts the microbatch losses from
     device memory to every stage's pinned memory, ordered after each stage's
     compute stream: each stage's one host wait of the run, after which its
     device work is done.

   Counted exactly over the strict stand-in (tests/test_pipe_nccl.c): one host
   wait per rank and run, no device allocation, no event created, in steady
   state.

   Memory. A chunk's activations, gradients and saved scratch for a microbatch
   are let go after its last backward part (W, or BW) and its gradient send. The
   last unit's outputs are kept until the next run (vs_pipe_mb_output). All of it
   through the world's allocator hooks. The simulator's peak_live is what a
   schedule holds, in (chunk, microbatch) activations; vs_pipe_check_desc bounds it.

   Faults. A peer that does not come within the communicator's timeout gives
   every rank an error naming the instruction it waited at and the stage it
   waited for ("stage 2 at instruction 7 (RF2.1) waiting for stage 1: ...");
   on threads the job's fail-fast ends the waits of all ranks at once.

   A stage whose own instruction fails (a callback's error; a tensor off its spec,
   "input \"x\" got f32[5,7], spec x:f32[*,8]"; a receive posted ahead, named
   by the instruction it is for), or whose run fails at its end (the losses'
   wait, on GPUs), aborts its links with vs_comm_abort_with: its
   error is the job's cause, and every other rank's error names its world
   rank, stage, instruction and message ("world rank 5 failed
   (VS_ERR_INVALID): vs_pipe_run: stage 1 at instruction 5 (F1.1): ...").

   With vescale_ddp.h (the whole recipe, against one rank:
   tests/test_pipe_mesh.c):
   - one vs_ddp over the whole mesh, registering on each rank the parameters
     of its stage's units. The DDP's pp_dim ("PP" by default) knows stages hold
     different parameters, and its clipping sums the norm over DP x TP x PP (a
     DDP per stage would clip each stage by its own norm);
   - on_sync(chunk) runs right after a chunk's last backward: call
     vs_ddp_grad_ready for its parameters, so their reduction overlaps the rest
     of the pipeline. Buckets reduce in order: register a parameter that waits
     for on_step, like a tied one, first, so its bucket is the last;
   - on_step runs last: finish the sync, clip, step;
   - tied parameters (an embedding on the first stage, the LM head on the
     last): sum the two gradients with vs_pipe_tie_grads before their DP
     reduction (in on_step, before vs_ddp_grad_ready for them);
   - on one stage vs_pipe_tie_grads does nothing: keep one gradient buffer per
     user there too and add them once, so the bits do not depend on where the
     model is cut;
   - a tied parameter registered on two stages counts twice in the clip norm;
     tests/test_pipe_mesh.c shows the correction.

   Unit hooks (vs_pipe_desc.on_unit; ZeRO-3 gathers, prefetches, releases and
   reduce-scatters a unit's parameters with them, in the schedule's order):
   - called on the unit's stage, on the thread of vs_pipe_run, around each part:
     FORWARD_BEFORE/AFTER, BACKWARD_BEFORE/AFTER (B, or the full backward),
     WEIGHT_BEFORE/AFTER (W, only for a unit with split parts: the zero-bubble
     kinds; W needs the parameters too);
   - in the order the engine runs the parts: an F instruction its chunk's
     units first to last, B or BW last to first, W last to first;
   - a recomputed forward (vs_pipe_unit.recompute) calls the forward points
     again, just before the unit's backward, with event.recompute set;
   - an evaluation run (vs_pipe_sched_forward) calls the forward points only,
     with event.forward_only set;
   - grads_final marks the unit's last backward part of the last microbatch
     (each chunk's backward parts run in microbatch order);
   - on NCCL the unit's work may still be queued on event.stream;
   - a hook's error ends the run as a unit's does: every stage's error names
     it ("... at instruction 5 (B2.1): unit hook (vs_pipe_desc.on_unit) at
     backward_before of unit \"l6\", microbatch 1: ...");
   - vs_pipe_hook_order lists the calls a run of a schedule makes on this
     stage, before the run: what comes next, for a prefetch.
   Their time is not in vs_pipe_last_hooks.

   Buffers. On threads and MPI the engine's buffers are host memory. On NCCL:
   - every activation, gradient, saved scratch and message is device memory,
     zeroed and copied on the compute stream (vs_pipe_desc.stream); headers and
     the losses use pinned host memory (cudaMallocHost); the microbatches'
     losses come to the host once, at the run's end;
   - the engine keeps the device blocks it lets go (sizes rounded to a power of
     two) and hands them out again on the compute stream, so a steady-state run
     allocates nothing; a block no run used for 16 runs is given back after a
     run, the rest at vs_pipe_free;
   - blocks come from cudaMallocAsync and go back with cudaFreeAsync on the
     compute stream: neither waits for the device (cudaMalloc and cudaFree do,
     NCCL kernels waiting on peers included: a cache miss mid-run with sends in
     flight both ways deadlocked two stages);
   - with the world's device hooks set they come from the hooks, which then
     must not wait for the device (a caching or stream-ordered allocator);
   - a block is reused only after its last use is queued on the compute
     stream, a send's buffer only once the compute stream has waited for the
     send (when, and why not sooner: _vs_pipe_retire's comment). So the
     blocks a run takes are the same every run.

   Lifetimes. A schedule and a pipe remember being freed: a second
   vs_pipe_sched_free or vs_pipe_free, or any call on a freed one, is
   VS_ERR_STATE ("already freed"), while its memory is
   - among its world's last 16 freed handles (vescale_mesh.h's vs_free_later);
   - for a schedule made with a NULL world: among the freeing thread's last 16
     such (released when the thread ends).

   A getter that returns an int gives VS_ERR_STATE as its value,
   vs_pipe_sched_print and vs_pipe_draw -1. Past that window a freed handle is
   freed memory: the call is undefined.

   The pipe of a training state (vs_train_pipe in vescale.h) is the training
   state's: vs_pipe_free on it is VS_ERR_STATE and leaves it working;
   vs_train_free frees it.

   Not yet:
   - a cost-aware ZB-V generator (plans are made at unit costs);
   - overlap of DualPipe's paired F&B (in the engine and the simulator);
   - a run on real GPUs: the NCCL path is tested over stand-ins only
     (tests/test_pipe_nccl.c on the strict CUDA + NCCL stand-in,
     tests/test_pipe_device.c on the lax mock);
   - grouping a stage's paired send and receive into one NCCL group (they are
     on two communicators, one per direction; vs_group_start is per
     communicator). Several links' NCCL kernels may be in flight at once on one
     GPU (NCCL's guide allows it only while they fit on the GPU together).
*/
/* Before the guard, so a later include with VESCALE_IMPLEMENTATION still works. */
/* VESCALE_STATIC: every part included is implemented here, static inline. */
#if defined(VESCALE_STATIC) && !defined(VESCALE_IMPLEMENTATION)
#define VESCALE_IMPLEMENTATION
#endif
#if defined(VESCALE_IMPLEMENTATION) && !defined(VESCALE_PIPE_IMPLEMENTATION)
#define VESCALE_PIPE_IMPLEMENTATION
#endif

#ifndef VESCALE_PIPE_INCLUDED
#define VESCALE_PIPE_INCLUDED

#include "vescale_mesh.h"

#ifdef __cplusplus
extern "C" {
#endif

// >>pipe-model -----------------------------------------------------------------

/* The VESCALE_VERSION_NUMBER this part was built with (catches a part compiled
   from a different release than vescale_mesh.h). */
VS_API int vs_pipe_version(void);

#define VS_PIPE_MAX_DIMS 8     // dims of a tensor that crosses a unit boundary
#define VS_PIPE_MAX_IO 16      // named tensors a unit takes, and that it returns
#define VS_PIPE_MAX_CHUNKS 256 // stages x virtual chunks
#define VS_PIPE_NAME_MAX 64    // bytes of a unit or tensor name, with the NUL
#define VS_PIPE_MAX_MBS (1 << 20) // microbatches of a schedule (so every (chunk, microbatch) count fits an int)

/* A named tensor as a unit sees it. Activations are the engine's memory (host on
   threads and MPI; on NCCL device memory from vs_device_alloc, which the
   callbacks work on with kernels or copies on call->stream); parameters stay the
   trainer's own. */
typedef struct vs_pipe_tensor {
    const char* name;
    vs_dtype dtype;
    int ndim;
    int64_t shape[VS_PIPE_MAX_DIMS];
    void* data; // the values
    void* grad; // backward only: the gradient, same shape and dtype, zeroed by the engine;
                // NULL for a data input (the data callback's outputs take no gradient)
} vs_pipe_tensor;

struct _vs_pipe_rt;

/* What a callback gets. in[i] follows the unit's `inputs` list, out[i] its
   `outputs` list.
   - forward: reads in[].data, makes each output with vs_pipe_output (which sets
     its shape) and writes it; may keep scratch for backward with vs_pipe_save
     (which also sets call->saved).
   - backward: in[].data and out[].data are as forward left them; out[].grad
     holds the gradient of the loss with respect to each output; the callback
     ADDS (+=) the input gradients into in[].grad (zeroed by the engine, so a
     tensor used by several units sums their parts, latest unit first, as one
     device's reverse pass does) and adds parameter gradients into its own
     buffers.
   - backward_input does only the first part, backward_weight only the second;
     W gets the same in, out (out[].grad still valid) and saved as its B did.
   - a unit with only a full backward runs it at B (W then does nothing for
     it); one with only the split parts runs both at BW. */
typedef struct vs_pipe_call {
    void* user;  // the unit's (or the data callback's) user pointer
    int unit;    // unit index; -1 for the data callback
    int mb;      // microbatch, 0..M-1
    int chunk;   // the chunk the unit runs in
    vs_pipe_tensor* in;
    int n_in;
    vs_pipe_tensor* out;
    int n_out;
    void* saved; // what forward kept with vs_pipe_save (backward: the same pointer)
    size_t saved_bytes;
    struct _vs_pipe_rt* _rt; // the engine's, do not touch
    /* The engine's compute stream (a cudaStream_t; vs_pipe_desc.stream): on NCCL,
       enqueue the callback's work here. The engine's own copies into and out of
       these buffers are on it too, so stream order is all a callback needs; the
       engine waits for the stream where the host must see a result (the loss).
       NULL on threads and MPI. */
    void* stream;
} vs_pipe_call;

typedef vs_result (*vs_pipe_fn)(vs_pipe_call* call);

/* In forward (or the data callback): allocates output i with this dtype and shape
   (ndim 0: a scalar) and returns its memory in *data (also in call->out[i].data). */
VS_API vs_result vs_pipe_output(vs_pipe_call* call, int i, vs_dtype dt, int ndim,
                                const int64_t* shape, void** data);
/* In forward: scratch of `bytes` kept for this unit and microbatch until its last
   backward part (W, or the full backward) has run. Both give engine memory:
   device memory on NCCL (vs_pipe_output's zeroed on the compute stream). */
VS_API vs_result vs_pipe_save(vs_pipe_call* call, size_t bytes, void** data);

/* One unit (layer) of the model, in model order.
   inputs/outputs: comma-separated tensor names, each optionally with a spec
   "name:dtype[d0,d1,...]" where a dim of * is free ("h:f32[*,64]", "loss:f32[]").
   An input names an output of any earlier unit (skip connections across stages
   are fine) or, when no earlier unit makes it, a data input that the data callback
   gives on whichever stage needs it. The last unit's first output is the loss
   (an f32 scalar). */
typedef struct vs_pipe_unit {
    const char* name;
    const char* inputs;
    const char* outputs;
    vs_pipe_fn forward;         // required
    vs_pipe_fn backward;        // full backward; or give both of the split ones:
    vs_pipe_fn backward_input;  //   B: input gradients only
    vs_pipe_fn backward_weight; //   W: parameter gradients only
    void* user;
    int64_t params; // parameter count (split by parameters)
    double flops;   // forward flops (split by flops; the simulator's default cost)
    double time_f, time_b, time_w; // measured seconds (split by time; simulator)
    const char* group; // units with the same group name are never split apart
    /* Activation recompute: what the forward keeps for the backward
       (vs_pipe_save) is let go right after it, and the forward runs again just
       before the unit's backward (vs_pipe_output then hands back the outputs
       made the first time, which the forward writes again); what it saved
       then is let go after the unit's last backward part (B, or W when the
       backward is split), so on a stage of many units only one unit's saved
       state is live in the backward.

       The forward must be deterministic and may run collectives (every rank of
       its group recomputes at the same point); gradients are then bit for bit
       those without recompute, for one more forward's time. Ignored in a
       forward-only run. */
    int recompute;
} vs_pipe_unit;

// >>pipe-split -----------------------------------------------------------------

typedef enum vs_pipe_split_kind {
    VS_PIPE_SPLIT_DEFAULT = 0, // manual when points are given, else flops
    VS_PIPE_SPLIT_MANUAL,      // at the named units
    VS_PIPE_SPLIT_UNIFORM,     // the same number of units per chunk (a unit costs 1)
    VS_PIPE_SPLIT_PARAMS,      // balance parameter counts
    VS_PIPE_SPLIT_FLOPS,       // balance flops
    VS_PIPE_SPLIT_TIME         // balance measured time_f + time_b + time_w
} vs_pipe_split_kind;

typedef enum vs_pipe_placement {
    VS_PIPE_PLACE_DEFAULT = 0, // LOOP
    VS_PIPE_PLACE_LOOP,        // chunk k on stage k % P (interleaved 1F1B)
    VS_PIPE_PLACE_V            // zigzag: 0..P-1, then P-1..0, ... (ZB-V, DualPipeV)
} vs_pipe_placement;

typedef struct vs_pipe_split_desc {
    int stages;                  // P, required
    int chunks;                  // V chunks per stage, 0: 1
    vs_pipe_split_kind kind;
    const char* points;          // manual: the P*V-1 unit names that start a chunk, in
                                 // model order, "l4,l8,l12" (spaces around names ignored)
    vs_pipe_placement placement;
    /* The schedule the split is for (VS_PIPE_DEFAULT: any), checked here rather
       than at vs_pipe_run: its chunks per stage (0 takes the kind's own: 2 for
       interleaved, ZB-V and DualPipeV, else 1) and placement (DEFAULT takes the kind's: V for
       ZB-V and DualPipeV, else LOOP); a LOOP split for ZB-V, or 2 chunks for
       1F1B, is VS_ERR_INVALID naming both. (An int: vs_pipe_kind is declared
       below, with the generators.) */
    int schedule;
} vs_pipe_split_desc;

/* Where the model is cut: chunk k (pipeline order) holds units
   [first_unit[k], first_unit[k+1]) and runs on stage chunk_stage[k]. kind and
   placement are resolved (never DEFAULT); chunks is V (>= 1). cost[k] is in the
   kind's measure (a unit counts 1 for uniform); a manual plan's is flops when any
   unit has flops, else the unit count. */
typedef struct vs_pipe_plan {
    int stages, chunks, nchunks, nunits; // nchunks = stages * chunks
    vs_pipe_split_kind kind;
    vs_pipe_placement placement;
    int first_unit[VS_PIPE_MAX_CHUNKS + 1];
    int chunk_stage[VS_PIPE_MAX_CHUNKS];
    double cost[VS_PIPE_MAX_CHUNKS]; // each chunk's cost under the split's measure
} vs_pipe_plan;

/* Splits the units into stages x chunks (P*V contiguous, non-empty chunks in model
   order).
   - Cuts fall only between groups: consecutive units with the same non-NULL
     group name are one unsplittable block (a group name coming back after
     other units is an error).
   - Balanced kinds minimise the largest chunk cost exactly (every unit counts,
     embedding and loss included); among the splits that reach it they take the
     one with the least sum of squared chunk costs, then the earliest cut
     positions (9 equal units in 4 chunks: 2, 2, 2, 3).
   - Splitting by flops (the default without points) when every unit's flops is
     0 is an error, not a guess.
   - Bad input is VS_ERR_INVALID (VS_ERR_NULL for NULL pointers and unit names)
     with the bad value named: more chunks than units or groups, unknown,
     repeated, out-of-order or group-cutting split points, a wrong number of
     them, a negative or non-finite cost, duplicate unit names. On error *out
     is zeroed.
   - Any thread; time O(P*V*units^2) at worst, near O(units^2) on ordinary
     models; memory O(P*V*units). */
VS_API vs_result vs_pipe_split(const vs_pipe_unit* units, int nunits,
                               const vs_pipe_split_desc* desc, vs_pipe_plan* out);
/* The chunk (pipeline order) that holds unit `unit` under plan, and its stage
   (stage may be NULL): e.g. the chunks to give vs_pipe_tie_grads. -1, with
   vs_last_error set, for a NULL plan or a unit out of 0..nunits-1. */
VS_API int vs_pipe_unit_chunk(const vs_pipe_plan* plan, int unit, int* stage);
/* A readable plan: a header (kind, measure, P x V, placement, largest and smallest
   chunk cost, max/mean imbalance) and one line per chunk with its stage, its units
   (names when 3 or fewer, else the first..last range) and its cost. units may be
   NULL (indices are printed). Returns the length it needs (snprintf-like, the text
   is cut to cap-1 bytes and NUL-terminated); buf may be NULL when cap is 0. A
   plan that is not one vs_pipe_split makes prints as one line saying so, with
   its counts; a NULL plan (or buf NULL with cap > 0) is -1 (vs_last_error). */
VS_API int vs_pipe_plan_print(const vs_pipe_plan* p, const vs_pipe_unit* units, char* buf,
                              size_t cap);

// >>pipe-sched -----------------------------------------------------------------

typedef enum vs_pipe_op {
    VS_PIPE_NOP = 0,
    VS_PIPE_F,      // forward of (chunk, mb)                       text: F<c>.<m>
    VS_PIPE_B,      // backward for the input (needs a W later)     B<c>.<m>
    VS_PIPE_W,      // backward for the weights                     W<c>.<m>
    VS_PIPE_BW,     // full backward (B and W together)             BW<c>.<m>
    VS_PIPE_SEND_F, // send chunk c's outputs to chunk c+1's stage  SF<c>.<m>
    VS_PIPE_RECV_F, // receive chunk c's inputs from chunk c-1's    RF<c>.<m>
    VS_PIPE_SEND_B, // send chunk c's input gradients to c-1's      SB<c>.<m>
    VS_PIPE_RECV_B, // receive chunk c's output gradients from c+1  RB<c>.<m>
    VS_PIPE_SYNC,   // chunk c's gradients are final: sync hook     SYNC<c>
    VS_PIPE_STEP,   // the optimizer hook                           STEP
    VS_PIPE_OP_COUNT
} vs_pipe_op;

typedef struct vs_pipe_instr {
    int op; // vs_pipe_op
    int chunk;
    int mb;
} vs_pipe_instr;

/* A schedule: per stage, a list of instructions. */
typedef struct vs_pipe_sched vs_pipe_sched;

/* An empty schedule for `stages` stages, nchunks chunks (chunk k on stage
   chunk_stage[k]; NULL: k % stages) and M microbatches (1..VS_PIPE_MAX_MBS).
   Allocation through vs_alloc(world) (world may be NULL: the C allocator).
   The getters return a negative vs_result for a NULL or freed schedule, a
   chunk or stage out of range (vs_last_error names it). vs_pipe_sched_free(NULL)
   is VS_OK. */
VS_API vs_result vs_pipe_sched_new(const vs_world* world, int stages, int nchunks,
                                   const int* chunk_stage, int mbs, vs_pipe_sched** out);
VS_API vs_result vs_pipe_sched_push(vs_pipe_sched* s, int stage, vs_pipe_op op, int chunk, int mb);
VS_API int vs_pipe_sched_stages(const vs_pipe_sched* s);
VS_API int vs_pipe_sched_nchunks(const vs_pipe_sched* s);
VS_API int vs_pipe_sched_mbs(const vs_pipe_sched* s);
VS_API int vs_pipe_sched_chunk_stage(const vs_pipe_sched* s, int chunk);
VS_API int vs_pipe_sched_len(const vs_pipe_sched* s, int stage);
VS_API vs_result vs_pipe_sched_at(const vs_pipe_sched* s, int stage, int i, vs_pipe_instr* out);
VS_API vs_result vs_pipe_sched_free(vs_pipe_sched* s);

/* The text form: a header line, then one line per stage:
       pipe stages=2 chunks=2 mbs=2 place=0,1
       0: F0.0 SF0.0 F0.1 SF0.1 RB0.0 BW0.0 RB0.1 BW0.1 SYNC0 STEP
       1: RF1.0 F1.0 BW1.0 SB1.0 RF1.1 F1.1 BW1.1 SB1.1 SYNC1 STEP
   Lines starting with # are comments. Print returns the length it needs
   (snprintf-like; buf may be NULL when cap is 0), -1 for a NULL or freed
   schedule (vs_last_error); parse errors name the line and the token. */
VS_API int vs_pipe_sched_print(const vs_pipe_sched* s, char* buf, size_t cap);
VS_API vs_result vs_pipe_sched_parse(const vs_world* world, const char* text, vs_pipe_sched** out);

/* Inserts the sends and receives that a schedule of compute instructions (F, B,
   W, BW, SYNC, STEP) needs: each send right after its producer, each receive
   before its consumer and in the order the peer sends (so it never deadlocks
   when the compute order is feasible). A schedule that already has sends and
   receives is left as it is. */
VS_API vs_result vs_pipe_sched_add_comm(vs_pipe_sched* s);
/* The forward-only schedule of a schedule (an evaluation): its F instructions
   in their order on each stage, with the sends and receives they need. A run
   of it computes the losses and the last unit's outputs, keeps no gradient and
   calls neither on_sync nor on_step (on_unit at forwards only); each
   microbatch's chunk lets go of its activations (what vs_pipe_save kept, its
   inputs and outputs) after its forward, or, when it sends them to another
   stage, once packed for the send. */
VS_API vs_result vs_pipe_sched_forward(const vs_pipe_sched* s, vs_pipe_sched** out);

typedef struct vs_pipe_check_desc {
    int64_t max_live_activations; // per stage: (chunk, mb) forwards held at once; 0: no bound (< 0: an error)
} vs_pipe_check_desc;

/* Validates a schedule (desc may be NULL):
   - every (chunk, mb) runs F, then B then W (or BW) once each, on its stage
     (a forward-only schedule, with no backward, send of gradients, SYNC or
     STEP anywhere, runs F once each: vs_pipe_sched_forward);
   - dependencies: F(c,m) after F(c-1,m); B(c,m) after B(c+1,m) (last chunk:
     after its own F); W after B; the data crosses stages by a send and a receive;
   - each chunk's parameter gradients accumulate in microbatch order (B/BW and W
     in increasing mb per chunk), so results equal one device bit for bit;
   - sends match receives in order between every pair of stages;
   - no cycle of waits (the lists are simulated; sends never block);
   - SYNC<c> after chunk c's last backward; STEP last (both optional);
   - the activation bound, when given.
   A broken rule is VS_ERR_INVALID naming the stage, the position, the rule and
   the instructions around it. */
VS_API vs_result vs_pipe_sched_check(const vs_pipe_sched* s, const vs_pipe_check_desc* desc);

// >>pipe-gen -------------------------------------------------------------------

typedef enum vs_pipe_kind {
    VS_PIPE_DEFAULT = 0,     // no schedule named: a field taking it chooses (vs_plan.schedule:
                             // 1F1B; vs_pipe_split_desc.schedule: any); vs_pipe_generate refuses it
    VS_PIPE_GPIPE = 1,       // all forwards, then all backwards
    VS_PIPE_1F1B,            // one forward one backward (PipeDream-flush)
    VS_PIPE_INTERLEAVED,     // 1F1B over V chunks per stage, placed round-robin
    VS_PIPE_ZBH1,            // zero bubble H1: B and W split, W fills the bubbles
    VS_PIPE_ZBV,             // zero bubble V: 2 chunks per stage, V placement
    VS_PIPE_DUALPIPEV,       // DualPipe's V-shaped half: 2 chunks per stage, overlapped F&B
    VS_PIPE_KIND_COUNT
} vs_pipe_kind;

/* "gpipe", "1f1b", "interleaved", "zbh1", "zbv", "dualpipev"; "invalid" else. */
VS_API const char* vs_pipe_kind_name(vs_pipe_kind k);
VS_API vs_result vs_pipe_kind_parse(const char* name, vs_pipe_kind* out);

/* Builds a schedule of `kind` for `stages` stages, `chunks` chunks per stage
   (0: the kind's own: 2 for interleaved, ZB-V and DualPipeV, else 1) and any
   M >= 1, with its sends and receives, SYNC hooks and STEP; it passes
   vs_pipe_sched_check. Where the ideal pattern needs more microbatches it
   degrades to a correct one. */
VS_API vs_result vs_pipe_generate(const vs_world* world, vs_pipe_kind kind, int stages,
                                  int chunks, int mbs, vs_pipe_sched** out);

// >>pipe-sim -------------------------------------------------------------------

/* Costs for the simulator: per chunk when the arrays are given, else the scalars
   for every chunk. p2p: seconds from a send to its receive. */
typedef struct vs_pipe_costs {
    double f, b, w;         // of one chunk and microbatch; all three 0: 1, 1, 1
    double p2p;             // per message
    const double* chunk_f;  // optional, nchunks entries each
    const double* chunk_b;
    const double* chunk_w;
} vs_pipe_costs;

typedef struct vs_pipe_sim {
    double makespan;     // from the first instruction to the last stage's end
    double bubble;       // idle fraction: 1 - (sum of busy time) / (stages * makespan)
    double ideal;        // total work / stages
    double busy[VS_PIPE_MAX_CHUNKS];     // per stage
    int peak_live[VS_PIPE_MAX_CHUNKS];   // per stage: most (chunk, mb) activations held
                                         // (from F until its W, or BW)
} vs_pipe_sim;

/* Runs the lists against the costs without running anything: each instruction
   starts when its stage is free and its inputs have arrived. Costs are finite
   and >= 0, and their sum over the schedule's instructions (with p2p for each)
   must stay finite (1e308 each is an error naming it, not an infinite
   makespan). */
VS_API vs_result vs_pipe_simulate(const vs_pipe_sched* s, const vs_pipe_costs* costs,
                                  vs_pipe_sim* out);
/* A text timeline, one row per stage, one column per time slot of `slot` seconds
   (0: the shortest instruction), with a legend; at most 4096 columns (a slot so
   small that the run needs more is cut there, and the text says so). Returns
   the length it needs (snprintf-like; buf may be NULL when cap is 0), -1 on
   error (vs_last_error). */
VS_API int vs_pipe_draw(const vs_pipe_sched* s, const vs_pipe_costs* costs, double slot,
                        char* buf, size_t cap);
/* Chrome-trace JSON (Perfetto, chrome://tracing) of the simulated run, written to
   `path`. Each stage is a thread row; each instruction an event named like its text. */
VS_API vs_result vs_pipe_trace_simulated(const vs_pipe_sched* s, const vs_pipe_costs* costs,
                                         const char* path);
/* The same JSON from measured times: for stage p, t0[p][i] and t1[p][i] (seconds)
   are the start and end of instruction i of its list (vs_pipe_last_timeline). */
VS_API vs_result vs_pipe_trace_write(const vs_pipe_sched* s, const double* const* t0,
                                     const double* const* t1, const char* path);

// >>pipe-engine ----------------------------------------------------------------

typedef enum vs_pipe_reduce {
    VS_PIPE_LOSS_DEFAULT = 0, // MEAN
    VS_PIPE_LOSS_MEAN,        // minibatch loss = sum of microbatch losses / M; each
                              // microbatch's loss gradient seeded with 1/M
    VS_PIPE_LOSS_SUM          // sum; seeded with 1
} vs_pipe_reduce;

typedef struct vs_pipe vs_pipe;

/* Where vs_pipe_desc.on_unit is called: around each unit's part (top
   comment, "Unit hooks"). Each BEFORE is followed by its AFTER (the next
   point) once the part succeeded. */
typedef enum vs_pipe_hook_point {
    VS_PIPE_HOOK_NONE = 0,
    VS_PIPE_HOOK_FORWARD_BEFORE,  // a forward, a recomputed one too (event.recompute)
    VS_PIPE_HOOK_FORWARD_AFTER,
    VS_PIPE_HOOK_BACKWARD_BEFORE, // B (backward_input), or the full backward (BW; B of a unit without split parts)
    VS_PIPE_HOOK_BACKWARD_AFTER,
    VS_PIPE_HOOK_WEIGHT_BEFORE,   // W of a unit with split parts (backward_weight); zero-bubble kinds
    VS_PIPE_HOOK_WEIGHT_AFTER,
    VS_PIPE_HOOK_POINT_COUNT
} vs_pipe_hook_point;

/* "forward_before", "forward_after", "backward_before", "backward_after",
   "weight_before", "weight_after"; "invalid" else. */
VS_API const char* vs_pipe_hook_point_name(vs_pipe_hook_point pt);

/* One call of on_unit, or one entry of vs_pipe_hook_order. */
typedef struct vs_pipe_hook_event {
    int point;        // vs_pipe_hook_point
    int unit;         // index into vs_pipe_desc.units
    int chunk;        // the chunk that holds it (on this stage)
    int mb;           // microbatch, 0..mbs-1
    int mbs;          // the run's M
    int instr;        // the instruction's position in this stage's list
    int64_t seq;      // this call's position in the run's sequence on this stage (vs_pipe_hook_order's index)
    int recompute;    // forward points: the forward run again just before the unit's backward
    int grads_final;  // BACKWARD_AFTER or WEIGHT_AFTER of the unit's last backward part of microbatch
                      // mbs-1: its parameter gradients are final for the step (reduce them now)
    int forward_only; // the run is an evaluation (vs_pipe_sched_forward): no backward follows
    void* stream;     // NCCL: the compute stream the unit's work is queued on; NULL on threads and MPI
                      // and in vs_pipe_hook_order
} vs_pipe_hook_event;

typedef vs_result (*vs_pipe_unit_hook)(void* user, const vs_pipe_hook_event* e);

typedef struct vs_pipe_desc {
    vs_mesh* mesh;                 // required; its PP dim holds the stages
    const char* pp_dim;            // NULL: "PP" (a mesh without it: a 1-stage pipeline)
    const vs_pipe_unit* units;     // required, kept by pointer until vs_pipe_free
    int nunits;
    const vs_pipe_plan* plan;      // required (vs_pipe_split); copied
    vs_pipe_fn data;               // gives data inputs: out[0] named, make it with vs_pipe_output
    void* data_user;
    vs_pipe_reduce loss;
    /* Hooks, on the stage that holds the chunk. on_sync runs at SYNC<c> (start the
       chunk's gradient sync, e.g. vs_ddp_grad_ready for its parameters); on_step at
       STEP. */
    vs_result (*on_sync)(void* user, int chunk);
    vs_result (*on_step)(void* user);
    void* hook_user;
    /* NCCL: the compute stream (a cudaStream_t) the units run on and the engine's
       copies and zeroing are enqueued on; NULL: the PP communicator's
       (vs_comm_stream; the mesh's for one stage). Sends and receives go on each
       link's own stream, after the compute stream (an event), so one waiting
       for its peer never holds up another link or the units. Ignored on threads
       and MPI. */
    void* stream;
    /* NCCL: 1 promises that microbatch m's tensors between stages have the same
       dtypes and shapes in every run (those of the first run that had a
       microbatch m; m's may differ from another microbatch's). From the second
       such run on, no receive waits on the host: the receiver knows the sizes
       and the sender checks the promise (a change fails the run with
       VS_ERR_MISMATCH naming the tensor). 0: each activation message's header
       (the shapes) is read by the receiving host, one host wait per message.
       Gradients never need one (their shapes are the activations'). The same
       on every stage. Ignored on threads and MPI. */
    int fixed_shapes;
    /* NCCL: 1 leaves the losses on the device at a run's end: every stage gets
       them in device memory (vs_pipe_loss_device), in the compute stream's
       order, so vs_pipe_run waits for nothing and copies nothing (its *loss is
       NaN); vs_pipe_loss and vs_pipe_mb_loss copy them when asked (a wait on
       the compute stream, with the deadline). 0: vs_pipe_run waits for them.
       Ignored on threads and MPI. */
    int defer_loss;
    /* Unit hooks (top comment, "Unit hooks"): called on the stage that runs a
       unit, before and after each part of it, in the schedule's order, with
       unit_user; NULL: none. An error ends the run as a unit's own does. */
    vs_pipe_unit_hook on_unit;
    void* unit_user;
} vs_pipe_desc;

/* Collective over the mesh. Checks the plan against the units and the mesh (its
   stage count must equal the PP dim: VS_ERR_MISMATCH; every stage holds a
   chunk), the units (names, a forward, a backward or both split parts:
   VS_ERR_NULL), and the tensor specs between producer and consumer (dtype and
   fixed dims must agree: VS_ERR_MISMATCH naming the tensor and both units). */
VS_API vs_result vs_pipe_init(const vs_pipe_desc* desc, vs_pipe** out);
/* The desc as the pipe uses it, every zero-is-default value resolved (as sokol's
   sg_query_desc): pp_dim the mesh's name of the pipeline dim (NULL when the mesh
   has no "PP": one stage), loss VS_PIPE_LOSS_MEAN for DEFAULT, fixed_shapes and
   defer_loss 0 or 1, plan the pipe's copy. stream stays as given (NULL: the PP
   communicator's, vs_comm_stream). Strings and the plan are owned by the mesh
   and the pipe. Passing the result to vs_pipe_init gives the same pipe. */
VS_API vs_result vs_pipe_query_desc(const vs_pipe* p, vs_pipe_desc* out);
/* Runs one minibatch through the schedule (validated first, once per schedule
   handle and again after it changes: VS_ERR_INVALID before anything runs; a
   schedule for another plan: VS_ERR_MISMATCH). *loss (may be NULL) gets the
   minibatch loss on every stage. A callback's error, a tensor that breaks its
   spec (VS_ERR_MISMATCH) or a peer that times out ends the run with an error
   naming the stage, the instruction and the unit.

   On NCCL it returns once the run's work on the compute stream is done, the
   sends' completion included, after one host wait (a header per activation
   message besides, without desc.fixed_shapes): for the microbatch losses'
   broadcast from the last stage, which every stage's PP communicator runs
   after its compute stream's work (an event). Hooks run on the host thread
   between instructions, with the units' work possibly still queued on the
   stream. */
VS_API vs_result vs_pipe_run(vs_pipe* p, const vs_pipe_sched* s, double* loss);
/* The on_unit calls a run of s makes on this stage, in their order (stream
   NULL; seq is the index): at most cap into out (NULL when cap is 0), the
   count into *n. The same for every run of s, with or without on_unit, so a
   consumer can learn at a step's start which unit comes next (ZeRO-3's
   prefetch). s is checked as vs_pipe_run checks it. Any thread but during
   another thread's vs_pipe_run of p (within a hook is fine). */
VS_API vs_result vs_pipe_hook_order(const vs_pipe* p, const vs_pipe_sched* s, vs_pipe_hook_event* out,
                                    size_t cap, size_t* n);
/* Microbatch mb's loss and output tensor i of the last unit, from the last run;
   on the stage that holds the last chunk (VS_ERR_STATE elsewhere). The output's
   data is engine memory (device memory on NCCL). */
VS_API vs_result vs_pipe_mb_loss(const vs_pipe* p, int mb, double* loss);
/* Mixed-precision loss scaling: the next runs seed the loss's gradient with
   `scale` times its value (1/M or 1), so every gradient holds scale times its
   value; the loss reported is not scaled. Finite and > 0 (VS_ERR_INVALID);
   1 by default. */
VS_API vs_result vs_pipe_set_loss_scale(vs_pipe* p, double scale);
/* The last run's minibatch loss, as vs_pipe_run gives it; every stage. With
   desc.defer_loss the first call after a run waits for the compute stream
   (with the mesh communicator's deadline) and copies the losses. */
VS_API vs_result vs_pipe_loss(vs_pipe* p, double* loss);
/* desc.defer_loss: the last run's microbatch losses (*m floats) in device
   memory on every stage, valid until the next run, in the compute stream's
   order (VS_ERR_STATE without desc.defer_loss or a run). */
VS_API vs_result vs_pipe_loss_device(const vs_pipe* p, const float** losses, int* m);
VS_API vs_result vs_pipe_mb_output(const vs_pipe* p, int mb, int i, vs_pipe_tensor* out);
/* The stage (PP coordinate) of this rank; a negative vs_result for a NULL or
   freed pipe. */
VS_API int vs_pipe_stage(const vs_pipe* p);
/* The last run's timeline on this stage: *n instructions, start and end seconds
   (from the run's start) in t0/t1 (valid until the next run). */
VS_API vs_result vs_pipe_last_timeline(const vs_pipe* p, const double** t0, const double** t1,
                                       int* n);
/* Every stage's timeline of the last run, on every rank of this rank's PP group
   (collective over it): t0[s], t1[s] are stage s's start and end seconds (its
   own clock from its run's start), n[s] its count; arrays of `stages` pointers
   (vs_pipe_plan.stages) and counts, as vs_pipe_trace_write takes them. Valid
   until the next run, gather or vs_pipe_free. */
VS_API vs_result vs_pipe_gather_timelines(vs_pipe* p, const double* const** t0, const double* const** t1,
                                          const int** n);
/* The last run's time in the on_sync and on_step hooks on this stage, summed:
   wall seconds and the calling thread's on-CPU seconds (where the platform has a
   thread CPU clock; else cpu = wall). Wall time beyond CPU time is waiting: on
   the transport a hook started (DDP's bucket reductions, whose progress threads
   take the core on a machine with fewer cores than ranks) or on a peer
   (vs_pipe_tie_grads). Either pointer may be NULL. */
VS_API vs_result vs_pipe_last_hooks(const vs_pipe* p, double* wall, double* cpu);
/* The most engine memory live at once during the last run on this stage, in
   bytes: the tensors between units, what units kept for their backward
   (vs_pipe_save), gradients of those tensors and message buffers (host blocks
   on threads and MPI, device blocks on NCCL); 0 before a run. The activation
   memory a schedule, recompute or an evaluation costs. */
VS_API vs_result vs_pipe_last_memory(const vs_pipe* p, size_t* peak);
/* Sums a buffer of a tied parameter's gradient (e.g. the embedding and the LM
   head) between the stages of chunks a and b, in chunk order so both get the
   same bits. Collective between the two stages (other stages return VS_OK at
   once). Chunks on one stage exchange nothing: their units must add into the
   one buffer they share, which then holds the sum; VS_OK at once
   (vs_pipe_unit_chunk tells where a unit is). */
VS_API vs_result vs_pipe_tie_grads(vs_pipe* p, int chunk_a, int chunk_b, void* grad,
                                   size_t count, vs_dtype dt);
/* Collective. NULL: VS_OK; a second free, VS_ERR_STATE (top comment, "Lifetimes"). */
VS_API vs_result vs_pipe_free(vs_pipe* p);

#ifdef __cplusplus
}
#endif
#endif // VESCALE_PIPE_INCLUDED

#if defined(VESCALE_PIPE_IMPLEMENTATION) && !defined(VESCALE_PIPE_IMPLEMENTED)
#define VESCALE_PIPE_IMPLEMENTED
#include <math.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* Device buffers come with the NCCL transport (>>pipe-engine): activations,
   gradients, saved scratch and messages in device memory, copies on the streams. */
#if defined(VESCALE_NCCL) && !defined(_VS_PIPE_CUDA)
#define _VS_PIPE_CUDA 1
#endif
#ifdef _VS_PIPE_CUDA
#include <cuda_runtime.h>
#endif
/* Tests only (tests/test_pipe_device.c): the device path over the threads
   transport, with a stand-in CUDA runtime. */
#ifndef _VS_PIPE_FORCE_DEVICE
#define _VS_PIPE_FORCE_DEVICE 0
#endif
#ifdef __cplusplus
extern "C" {
#endif

/* The mesh's private macros, for a TU that has this implementation without the
   mesh's (VESCALE_PIPE_IMPLEMENTATION alone). */
#ifndef _VS_UNUSED
#if defined(__GNUC__) || defined(__clang__)
#define _VS_UNUSED __attribute__((unused))
#define _VS_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define _VS_UNUSED
#define _VS_PRINTF(a, b)
#endif
#endif
#ifndef _VS_TRY
#define _VS_TRY(x)                                                                   \
    do {                                                                             \
        vs_result _vs_r = (x);                                                       \
        if (_vs_r) return _vs_r;                                                     \
    } while (0)
#endif
#define _VS_PIPE_PRIVATE static _VS_UNUSED

// >>pipe-model -----------------------------------------------------------------

VS_API int vs_pipe_version(void) { return VESCALE_VERSION_NUMBER; }

/* n zeroed T through the world's allocator hooks (world NULL: the C allocator
   behind vs_alloc); NULL on overflow or out of memory. */
_VS_PIPE_PRIVATE void* _vs_pipe_new(const vs_world* w, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) return NULL;
    size_t bytes = n * size > 0 ? n * size : 1;
    void* p = vs_alloc(w, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}
#define _VS_PIPE_NEW(w, T, n) ((T*)_vs_pipe_new((w), (size_t)(n), sizeof(T)))

/* Handles that can tell they were freed (top comment, "Lifetimes"): a magic
   number first, the type's while live, _VS_PIPE_DEAD once freed, the memory
   then kept a while by vs_free_later. */
#define _VS_PIPE_LIVE 0x76735050u  /* "vsPP": a vs_pipe */
#define _VS_SCHED_LIVE 0x76735353u /* "vsSS": a vs_pipe_sched */
#define _VS_PIPE_DEAD 0x76734444u  /* "vsDD": freed */
_VS_PIPE_PRIVATE vs_result _vs_pipe_gone(const char* fn, const void* h, uint32_t magic, const char* what)
{
    if (magic == _VS_PIPE_DEAD) return vs_set_error(VS_ERR_STATE, "%s: this %s was already freed", fn, what);
    return vs_set_error(VS_ERR_INVALID, "%s: %p is not a live %s handle", fn, h, what);
}
/* VS_OK for a live handle or NULL (the function's own check names a NULL). */
#define _VS_SCHED_GONE(fn, s) \
    ((s) && (s)->magic != _VS_SCHED_LIVE ? _vs_pipe_gone(fn, (s), (s)->magic, "schedule") : VS_OK)
#define _VS_PIPE_GONE(fn, p) ((p) && (p)->magic != _VS_PIPE_LIVE ? _vs_pipe_gone(fn, (p), (p)->magic, "pipe") : VS_OK)

/* snprintf-like appending: keeps the length it would need in *len. */
_VS_PIPE_PRIVATE _VS_PRINTF(4, 5) void _vs_pipe_cat(char* buf, size_t cap, size_t* len, const char* fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t at = *len < cap ? *len : cap;
    int n = vsnprintf(buf ? buf + at : NULL, buf && cap > at ? cap - at : 0, fmt, ap);
    va_end(ap);
    if (n > 0) *len += (size_t)n;
}

/* The chunks per stage a schedule kind runs by its own count: 2 for interleaved,
   ZB-V and DualPipeV, else 1 (VS_PIPE_DEFAULT: 1). */
_VS_PIPE_PRIVATE int _vs_pipe_kind_own_chunks(vs_pipe_kind k)
{
    return k == VS_PIPE_INTERLEAVED || k == VS_PIPE_ZBV || k == VS_PIPE_DUALPIPEV ? 2 : 1;
}

/* `chunks` per stage for kind k (0: its own count) into *V, or VS_ERR_INVALID
   when k cannot run that many: ZB-V and DualPipeV place exactly 2, in a V; the
   others but interleaved run 1 (VS_PIPE_DEFAULT: any). */
_VS_PIPE_PRIVATE vs_result _vs_pipe_kind_chunks(const char* fn, vs_pipe_kind k, int chunks, int* V)
{
    const int vshape = k == VS_PIPE_ZBV || k == VS_PIPE_DUALPIPEV;
    *V = chunks ? chunks : _vs_pipe_kind_own_chunks(k);
    if (vshape && *V != 2)
        return vs_set_error(VS_ERR_INVALID, "%s: chunks = %d per stage for schedule %s (it places 2, in a V)", fn, *V,
                            vs_pipe_kind_name(k));
    if (k && k != VS_PIPE_INTERLEAVED && !vshape && *V != 1)
        return vs_set_error(VS_ERR_INVALID,
                            "%s: chunks = %d per stage for schedule %s (it runs 1; interleaved runs several)", fn, *V,
                            vs_pipe_kind_name(k));
    return VS_OK;
}

/* The callbacks' helpers work on the engine's state (>>pipe-engine, below). */
_VS_PIPE_PRIVATE vs_result _vs_pipe_output(vs_pipe_call* call, int i, vs_dtype dt, int ndim, const int64_t* shape,
                                           void** data);
_VS_PIPE_PRIVATE vs_result _vs_pipe_save(vs_pipe_call* call, size_t bytes, void** data);
VS_API vs_result vs_pipe_output(vs_pipe_call* call, int i, vs_dtype dt, int ndim, const int64_t* shape, void** data)
{
    return _vs_pipe_output(call, i, dt, ndim, shape, data);
}
VS_API vs_result vs_pipe_save(vs_pipe_call* call, size_t bytes, void** data)
{
    return _vs_pipe_save(call, bytes, data);
}

// >>pipe-split -----------------------------------------------------------------
/* How vs_pipe_split cuts.
   Atoms: a unit, or a run of consecutive units with the same non-NULL group name;
   cuts fall only between atoms. A chunk's cost is the sum of its units' costs,
   added in model order from 0 (so the plan's cost[] is exactly what was compared).
   Balanced kinds, two exact dynamic programmes over cut positions:
     1. m = the smallest possible largest chunk cost: g[k][i] = the best largest
        cost of atoms [i, A) in k chunks = min over the first cut p of
        max(cost(i, p), g[k-1][p]);
     2. among the splits whose every chunk costs <= m, the one with the smallest
        sum of squared chunk costs (the most even), and among those the earliest
        cut positions (lexicographically smallest first_unit[]).
   So 9 equal units in 4 chunks give 2, 2, 2, 3. Both passes stop a chunk as soon
   as it outgrows a bound (an even split by atom count, then m), which keeps them
   near O(units^2) instead of O(chunks x units^2) on ordinary models. */

typedef struct _vs_pipe_split_key {
    const char* name;
    int index;
} _vs_pipe_split_key;

_VS_PIPE_PRIVATE int _vs_pipe_split_key_cmp(const void* a, const void* b)
{
    const _vs_pipe_split_key* x = (const _vs_pipe_split_key*)a;
    const _vs_pipe_split_key* y = (const _vs_pipe_split_key*)b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

_VS_PIPE_PRIVATE const char* _vs_pipe_split_kind_name(vs_pipe_split_kind k)
{
    switch (k) {
    case VS_PIPE_SPLIT_DEFAULT: return "default";
    case VS_PIPE_SPLIT_MANUAL: return "manual";
    case VS_PIPE_SPLIT_UNIFORM: return "uniform";
    case VS_PIPE_SPLIT_PARAMS: return "params";
    case VS_PIPE_SPLIT_FLOPS: return "flops";
    case VS_PIPE_SPLIT_TIME: return "time";
    }
    return "unknown";
}

/* The measure a plan's costs are in: the balanced kind's own; for manual splits
   flops when any unit has flops, else the unit count (UNIFORM). */
_VS_PIPE_PRIVATE vs_pipe_split_kind _vs_pipe_split_measure(vs_pipe_split_kind kind, const vs_pipe_unit* u, int n)
{
    if (kind != VS_PIPE_SPLIT_MANUAL) return kind;
    for (int i = 0; u && i < n; i++)
        if (u[i].flops != 0) return VS_PIPE_SPLIT_FLOPS;
    return VS_PIPE_SPLIT_UNIFORM;
}

_VS_PIPE_PRIVATE const char* _vs_pipe_split_measure_name(vs_pipe_split_kind m)
{
    switch (m) {
    case VS_PIPE_SPLIT_UNIFORM: return "units";
    case VS_PIPE_SPLIT_PARAMS: return "params";
    case VS_PIPE_SPLIT_FLOPS: return "flops";
    case VS_PIPE_SPLIT_TIME: return "seconds (f+b+w)";
    default: return "?";
    }
}

/* A cost as a person reads it: 123.0, 0.00125, 1.5e+12. */
_VS_PIPE_PRIVATE void _vs_pipe_split_fmt(char* s, size_t cap, double c)
{
    double a = c < 0 ? -c : c;
    if (a != 0 && (a >= 1e7 || a < 0.1))
        snprintf(s, cap, "%.4g", c);
    else
        snprintf(s, cap, "%.1f", c);
}

/* Unit u's cost under measure m, or an error naming the unit and the bad value. */
_VS_PIPE_PRIVATE vs_result _vs_pipe_split_cost(const vs_pipe_unit* units, int u, vs_pipe_split_kind m, double* c)
{
    const vs_pipe_unit* x = &units[u];
    switch (m) {
    case VS_PIPE_SPLIT_PARAMS:
        if (x->params < 0)
            return vs_set_error(VS_ERR_INVALID, "vs_pipe_split: unit '%s' (%d) has params = %lld (want >= 0)",
                                x->name, u, (long long)x->params);
        *c = (double)x->params;
        return VS_OK;
    case VS_PIPE_SPLIT_FLOPS:
        if (!(x->flops >= 0 && x->flops < HUGE_VAL))
            return vs_set_error(VS_ERR_INVALID, "vs_pipe_split: unit '%s' (%d) has flops = %g (want finite, >= 0)",
                                x->name, u, x->flops);
        *c = x->flops;
        return VS_OK;
    case VS_PIPE_SPLIT_TIME: {
        const double t[3] = {x->time_f, x->time_b, x->time_w};
        const char* tn[3] = {"time_f", "time_b", "time_w"};
        for (int j = 0; j < 3; j++)
            if (!(t[j] >= 0 && t[j] < HUGE_VAL))
                return vs_set_error(VS_ERR_INVALID,
                                    "vs_pipe_split: unit '%s' (%d) has %s = %g (want finite seconds, >= 0)", x->name,
                                    u, tn[j], t[j]);
        *c = t[0] + t[1] + t[2];
        return VS_OK;
    }
    default: *c = 1; return VS_OK;
    }
}

/* Atoms [i, p) cost: their units' costs added in model order. */
#define _VS_PIPE_SPLIT_ADD(s, cost, as, a)                                                                           \
    for (int _u = (as)[a]; _u < (as)[(a) + 1]; _u++) (s) += (cost)[_u]

/* The balanced split of A atoms (unit ranges as[a]..as[a+1]) into K chunks:
   writes the K-1 cut atoms to cut[1..K-1] (cut[0] = 0, cut[K] = A). */
_VS_PIPE_PRIVATE vs_result _vs_pipe_split_balance(const double* cost, const int* as, int A, int K, int* cut)
{
    size_t row = (size_t)A + 1;
    double* g0 = _VS_PIPE_NEW(NULL, double, row);
    double* g1 = _VS_PIPE_NEW(NULL, double, row);
    int* next = _VS_PIPE_NEW(NULL, int, (size_t)K * row);
    if (!g0 || !g1 || !next) {
        vs_free(NULL, g0), vs_free(NULL, g1), vs_free(NULL, next);
        return vs_set_error(VS_ERR_NOMEM, "vs_pipe_split: no memory for %d chunks x %d groups", K, A);
    }
    // bound: the largest chunk of an even split by atom count (>= the optimum)
    double ub = 0;
    for (int k = 0; k < K; k++) {
        double s = 0;
        for (int a = (int)((long long)k * A / K); a < (int)((long long)(k + 1) * A / K); a++) _VS_PIPE_SPLIT_ADD(s, cost, as, a);
        if (s > ub) ub = s;
    }
    // pass 1: g[k][i] over k = 1..K, two rows (g0 = k-1, g1 = k)
    for (int i = 0; i < A; i++) {
        double s = 0;
        for (int a = i; a < A; a++) _VS_PIPE_SPLIT_ADD(s, cost, as, a);
        g0[i] = s;
    }
    for (int k = 2; k <= K; k++) {
        for (int i = 0; i <= A - k; i++) {
            double best = HUGE_VAL, s = 0;
            for (int p = i + 1; p <= A - (k - 1); p++) {
                _VS_PIPE_SPLIT_ADD(s, cost, as, p - 1);
                if (s > ub || s >= best) break; // only grows from here
                double v = s > g0[p] ? s : g0[p];
                if (v < best) best = v;
            }
            g1[i] = best;
        }
        double* t = g0;
        g0 = g1, g1 = t;
    }
    const double m = g0[0];
    // pass 2: h[k][i] = least sum of squares of atoms [i, A) in k chunks each <= m;
    // next[k-1][i] = its first cut, the earliest on ties
    for (int i = 0; i < A; i++) {
        double s = 0;
        for (int a = i; a < A; a++) _VS_PIPE_SPLIT_ADD(s, cost, as, a);
        g0[i] = s <= m ? s * s : HUGE_VAL;
        next[i] = A;
    }
    for (int k = 2; k <= K; k++) {
        for (int i = 0; i <= A - k; i++) {
            double best = HUGE_VAL, s = 0;
            int at = -1;
            for (int p = i + 1; p <= A - (k - 1); p++) {
                _VS_PIPE_SPLIT_ADD(s, cost, as, p - 1);
                if (s > m || s * s >= best) break; // only grows from here
                if (g0[p] == HUGE_VAL) continue;
                double v = s * s + g0[p];
                if (v < best) best = v, at = p;
            }
            g1[i] = best;
            next[(size_t)(k - 1) * row + (size_t)i] = at;
        }
        double* t = g0;
        g0 = g1, g1 = t;
    }
    int i = 0;
    cut[0] = 0;
    for (int k = K; k >= 2; k--) {
        i = next[(size_t)(k - 1) * row + (size_t)i];
        if (i < 0) break; // cannot happen: the optimum m is reachable
        cut[K - k + 1] = i;
    }
    cut[K] = A;
    vs_free(NULL, g0), vs_free(NULL, g1), vs_free(NULL, next);
    if (i < 0) return vs_set_error(VS_ERR_STATE, "vs_pipe_split: internal error, no split reaches cost %g", m);
    return VS_OK;
}
#undef _VS_PIPE_SPLIT_ADD

/* Manual points: "l4, l8" -> cut[1..K-1] as unit indices; each must start an atom
   (atom_start[u] == u). */
_VS_PIPE_PRIVATE vs_result _vs_pipe_split_points(const vs_pipe_unit* units, int n, const char* points, int K,
                                                 const int* atom_of_start, int* cut)
{
    int count = 0;
    if (points) {
        const char* q = points;
        while (*q == ' ' || *q == '\t') q++;
        if (*q) {
            count = 1;
            for (q = points; *q; q++) count += *q == ',';
        }
    }
    if (count != K - 1)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_split: %d split points \"%s\" for %d chunks, want %d (each starts a chunk)",
                            count, points ? points : "(null)", K, K - 1);
    const char* q = points;
    cut[0] = 0;
    for (int j = 1; j < K; j++) {
        while (*q == ' ' || *q == '\t') q++;
        const char* e = q;
        while (*e && *e != ',') e++;
        const char* t = e;
        while (t > q && (t[-1] == ' ' || t[-1] == '\t')) t--;
        int len = (int)(t - q);
        if (len == 0)
            return vs_set_error(VS_ERR_INVALID, "vs_pipe_split: split point %d in \"%s\" is empty", j, points);
        int u = -1;
        for (int x = 0; x < n && u < 0; x++)
            if (strncmp(units[x].name, q, (size_t)len) == 0 && units[x].name[len] == 0) u = x;
        if (u < 0)
            return vs_set_error(VS_ERR_INVALID, "vs_pipe_split: split point '%.*s' is not the name of a unit", len, q);
        if (u == 0)
            return vs_set_error(VS_ERR_INVALID,
                                "vs_pipe_split: split point '%.*s' is the first unit (chunk 0 starts there already)",
                                len, q);
        if (u == cut[j - 1])
            return vs_set_error(VS_ERR_INVALID, "vs_pipe_split: split point '%.*s' is given twice", len, q);
        if (u < cut[j - 1])
            return vs_set_error(VS_ERR_INVALID,
                                "vs_pipe_split: split points out of model order: '%.*s' (unit %d) comes after '%s' (unit %d)",
                                len, q, u, units[cut[j - 1]].name, cut[j - 1]);
        if (atom_of_start[u] != u) {
            int a = atom_of_start[u], b = u;
            while (b + 1 < n && units[b + 1].group && strcmp(units[b + 1].group, units[u].group) == 0) b++;
            return vs_set_error(VS_ERR_INVALID,
                                "vs_pipe_split: split point '%.*s' cuts inside group '%s' (units %s..%s)", len, q,
                                units[u].group, units[a].name, units[b].name);
        }
        cut[j] = u;
        q = *e ? e + 1 : e;
    }
    cut[K] = n;
    return VS_OK;
}

VS_API vs_result vs_pipe_split(const vs_pipe_unit* units, int nunits, const vs_pipe_split_desc* desc,
                               vs_pipe_plan* out)
{
    if (!out) return vs_set_error(VS_ERR_NULL, "vs_pipe_split: out is NULL");
    memset(out, 0, sizeof *out);
    if (!units) return vs_set_error(VS_ERR_NULL, "vs_pipe_split: units is NULL");
    if (!desc) return vs_set_error(VS_ERR_NULL, "vs_pipe_split: desc is NULL");
    if (nunits < 1) return vs_set_error(VS_ERR_INVALID, "vs_pipe_split: nunits = %d (at least 1)", nunits);
    if (desc->stages < 1 || desc->stages > VS_PIPE_MAX_CHUNKS)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_split: stages = %d (1..%d)", desc->stages, VS_PIPE_MAX_CHUNKS);
    if (desc->chunks < 0)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_split: chunks = %d (chunks per stage; 0 means 1)", desc->chunks);
    const vs_pipe_kind sk = (vs_pipe_kind)desc->schedule;
    if ((int)sk < 0 || (int)sk >= (int)VS_PIPE_KIND_COUNT)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_split: schedule = %d is not a vs_pipe_kind", (int)sk);
    const int vshape = sk == VS_PIPE_ZBV || sk == VS_PIPE_DUALPIPEV, P = desc->stages;
    int V;
    _VS_TRY(_vs_pipe_kind_chunks("vs_pipe_split", sk, desc->chunks, &V));
    if ((long long)P * V > VS_PIPE_MAX_CHUNKS)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_split: %d stages x %d chunks = %lld chunks, more than VS_PIPE_MAX_CHUNKS (%d)",
                            P, V, (long long)P * V, VS_PIPE_MAX_CHUNKS);
    const int K = P * V;
    vs_pipe_split_kind kind = desc->kind;
    if (kind == VS_PIPE_SPLIT_DEFAULT) kind = desc->points ? VS_PIPE_SPLIT_MANUAL : VS_PIPE_SPLIT_FLOPS;
    if ((int)kind < (int)VS_PIPE_SPLIT_MANUAL || (int)kind > (int)VS_PIPE_SPLIT_TIME)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_split: kind = %d is not a vs_pipe_split_kind", (int)desc->kind);
    if (kind != VS_PIPE_SPLIT_MANUAL && desc->points)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_split: split points \"%s\" given with kind %s (points need kind manual or default)",
                            desc->points, _vs_pipe_split_kind_name(kind));
    vs_pipe_placement place = desc->placement != VS_PIPE_PLACE_DEFAULT ? desc->placement
                            : vshape                                   ? VS_PIPE_PLACE_V
                                                                       : VS_PIPE_PLACE_LOOP;
    if (place != VS_PIPE_PLACE_LOOP && place != VS_PIPE_PLACE_V)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_split: placement = %d is not a vs_pipe_placement", (int)desc->placement);
    if (V > 1 && ((vshape && place != VS_PIPE_PLACE_V) || (sk == VS_PIPE_INTERLEAVED && place != VS_PIPE_PLACE_LOOP)))
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_split: placement %s does not fit schedule %s (it needs %s)",
                            place == VS_PIPE_PLACE_V ? "V" : "LOOP", vs_pipe_kind_name(sk), vshape ? "V" : "LOOP");
    if (K > nunits)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_split: %d chunks (%d stages x %d) but only %d units", K, P, V, nunits);

    vs_result r = VS_OK;
    _vs_pipe_split_key* keys = _VS_PIPE_NEW(NULL, _vs_pipe_split_key, nunits);
    int* astart = _VS_PIPE_NEW(NULL, int, (size_t)nunits + 1); // atom a: units astart[a]..astart[a+1]
    int* atom_of = _VS_PIPE_NEW(NULL, int, nunits);            // unit -> the first unit of its atom
    double* cost = _VS_PIPE_NEW(NULL, double, nunits);
    int cut[VS_PIPE_MAX_CHUNKS + 1];
    int A = 0, ng = 0; // atoms, grouped atoms
    vs_pipe_split_kind m = _vs_pipe_split_measure(kind, units, nunits);
    double total = 0;
    if (!keys || !astart || !atom_of || !cost) {
        r = vs_set_error(VS_ERR_NOMEM, "vs_pipe_split: no memory for %d units", nunits);
        goto done;
    }
    // names: present, short enough, unique
    for (int u = 0; u < nunits; u++) {
        if (!units[u].name) {
            r = vs_set_error(VS_ERR_NULL, "vs_pipe_split: unit %d has no name (NULL)", u);
            goto done;
        }
        if (strlen(units[u].name) >= VS_PIPE_NAME_MAX) {
            r = vs_set_error(VS_ERR_INVALID, "vs_pipe_split: unit %d's name '%.40s...' is longer than %d bytes", u,
                             units[u].name, VS_PIPE_NAME_MAX - 1);
            goto done;
        }
        keys[u].name = units[u].name, keys[u].index = u;
    }
    qsort(keys, (size_t)nunits, sizeof *keys, _vs_pipe_split_key_cmp);
    for (int j = 1; j < nunits; j++)
        if (strcmp(keys[j - 1].name, keys[j].name) == 0) {
            r = vs_set_error(VS_ERR_INVALID, "vs_pipe_split: units %d and %d are both named '%s'", keys[j - 1].index,
                             keys[j].index, keys[j].name);
            goto done;
        }
    // atoms; a group name must not come back after other units
    for (int u = 0; u < nunits; u++) {
        const char* g = units[u].group;
        if (u > 0 && g && units[u - 1].group && strcmp(g, units[u - 1].group) == 0) {
            atom_of[u] = atom_of[u - 1];
            continue;
        }
        astart[A++] = u;
        atom_of[u] = u;
        if (g) keys[ng].name = g, keys[ng++].index = u;
    }
    astart[A] = nunits;
    qsort(keys, (size_t)ng, sizeof *keys, _vs_pipe_split_key_cmp);
    for (int j = 1; j < ng; j++)
        if (strcmp(keys[j - 1].name, keys[j].name) == 0) {
            int a = keys[j - 1].index, b = keys[j].index;
            r = vs_set_error(VS_ERR_INVALID,
                             "vs_pipe_split: group '%s' is not contiguous: it holds unit '%s' (%d) and again '%s' (%d) after other units",
                             keys[j].name, units[a].name, a, units[b].name, b);
            goto done;
        }
    if (K > A) {
        r = vs_set_error(VS_ERR_INVALID, "vs_pipe_split: %d chunks (%d stages x %d) but only %d unsplittable groups (%d units)",
                         K, P, V, A, nunits);
        goto done;
    }
    // costs under the measure
    for (int u = 0; u < nunits; u++) {
        if ((r = _vs_pipe_split_cost(units, u, m, &cost[u])) != VS_OK) goto done;
        total += cost[u];
    }
    if (!(total < HUGE_VAL)) {
        r = vs_set_error(VS_ERR_INVALID, "vs_pipe_split: the units' %s add up to infinity", _vs_pipe_split_measure_name(m));
        goto done;
    }
    if (kind != VS_PIPE_SPLIT_MANUAL && total == 0) {
        r = vs_set_error(VS_ERR_INVALID, "vs_pipe_split: split by %s%s, but every unit's %s is 0 (set them, or pick another kind)",
                         _vs_pipe_split_kind_name(kind), desc->kind == VS_PIPE_SPLIT_DEFAULT ? " (the default)" : "",
                         kind == VS_PIPE_SPLIT_TIME ? "time_f + time_b + time_w" : _vs_pipe_split_kind_name(kind));
        goto done;
    }
    // cuts
    if (kind == VS_PIPE_SPLIT_MANUAL) {
        if ((r = _vs_pipe_split_points(units, nunits, desc->points, K, atom_of, cut)) != VS_OK) goto done;
    } else {
        if ((r = _vs_pipe_split_balance(cost, astart, A, K, cut)) != VS_OK) goto done;
        for (int k = 0; k <= K; k++) cut[k] = astart[cut[k]];
    }
    out->stages = P, out->chunks = V, out->nchunks = K, out->nunits = nunits;
    out->kind = kind, out->placement = place;
    for (int k = 0; k <= K; k++) out->first_unit[k] = cut[k];
    for (int k = 0; k < K; k++) {
        double s = 0;
        for (int u = cut[k]; u < cut[k + 1]; u++) s += cost[u];
        out->cost[k] = s;
        int round = k / P, pos = k % P;
        out->chunk_stage[k] = place == VS_PIPE_PLACE_V && round % 2 ? P - 1 - pos : pos;
    }
done:
    vs_free(NULL, keys), vs_free(NULL, astart), vs_free(NULL, atom_of), vs_free(NULL, cost);
    if (r != VS_OK) memset(out, 0, sizeof *out);
    return r;
}

_VS_PIPE_PRIVATE int _vs_pipe_bad_buf(const char* fn, const char* buf, size_t cap);

VS_API int vs_pipe_plan_print(const vs_pipe_plan* p, const vs_pipe_unit* units, char* buf, size_t cap)
{
    size_t len = 0;
    if (buf && cap) buf[0] = 0;
    if (!p) return vs_set_error(VS_ERR_NULL, "vs_pipe_plan_print: plan is NULL"), -1;
    if (_vs_pipe_bad_buf("vs_pipe_plan_print", buf, cap)) return -1;
    int K = p->nchunks, ok = K >= 1 && K <= VS_PIPE_MAX_CHUNKS && p->stages >= 1 && p->first_unit[0] == 0 &&
                             p->first_unit[K] == p->nunits;
    for (int k = 0; ok && k < K; k++)
        ok = p->first_unit[k] < p->first_unit[k + 1] && p->chunk_stage[k] >= 0 && p->chunk_stage[k] < p->stages;
    if (!ok) {
        _vs_pipe_cat(buf, cap, &len, "pipeline plan: invalid (%d chunks, %d stages, %d units)\n", K, p->stages,
                     p->nunits);
        return (int)len;
    }
    double mx = p->cost[0], mn = p->cost[0], sum = 0;
    for (int k = 0; k < K; k++) {
        if (p->cost[k] > mx) mx = p->cost[k];
        if (p->cost[k] < mn) mn = p->cost[k];
        sum += p->cost[k];
    }
    char a[32], b[32], c[32];
    _vs_pipe_split_fmt(a, sizeof a, mx);
    _vs_pipe_split_fmt(b, sizeof b, mn);
    vs_pipe_split_kind m = _vs_pipe_split_measure(p->kind, units, p->nunits);
    _vs_pipe_cat(buf, cap, &len, "pipeline plan: split %s, cost in %s; %d stages x %d chunks, placement %s; chunk cost max %s min %s",
                 _vs_pipe_split_kind_name(p->kind), units || p->kind != VS_PIPE_SPLIT_MANUAL ? _vs_pipe_split_measure_name(m) : "flops or units",
                 p->stages, p->chunks, p->placement == VS_PIPE_PLACE_V ? "V" : "loop", a, b);
    if (sum > 0)
        _vs_pipe_cat(buf, cap, &len, ", imbalance %.3f (max/mean)\n", mx * K / sum);
    else
        _vs_pipe_cat(buf, cap, &len, "\n");
    for (int k = 0; k < K; k++) {
        int u0 = p->first_unit[k], u1 = p->first_unit[k + 1], nu = u1 - u0;
        _vs_pipe_cat(buf, cap, &len, "  stage %d chunk %d: ", p->chunk_stage[k], k);
        if (!units)
            _vs_pipe_cat(buf, cap, &len, "units %d..%d", u0, u1 - 1);
        else if (nu <= 3)
            for (int u = u0; u < u1; u++)
                _vs_pipe_cat(buf, cap, &len, "%s%s", u > u0 ? ", " : "", units[u].name ? units[u].name : "?");
        else
            _vs_pipe_cat(buf, cap, &len, "units %s..%s", units[u0].name ? units[u0].name : "?",
                         units[u1 - 1].name ? units[u1 - 1].name : "?");
        _vs_pipe_split_fmt(c, sizeof c, p->cost[k]);
        _vs_pipe_cat(buf, cap, &len, " (%d unit%s) cost %s\n", nu, nu == 1 ? "" : "s", c);
    }
    return (int)len;
}

VS_API int vs_pipe_unit_chunk(const vs_pipe_plan* plan, int unit, int* stage)
{
    if (stage) *stage = -1;
    if (!plan) return vs_set_error(VS_ERR_NULL, "vs_pipe_unit_chunk: plan is NULL"), -1;
    if (unit < 0 || unit >= plan->nunits)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_unit_chunk: unit %d (0..%d)", unit, plan->nunits - 1), -1;
    for (int c = 0; c < plan->nchunks && c < VS_PIPE_MAX_CHUNKS; c++)
        if (unit >= plan->first_unit[c] && unit < plan->first_unit[c + 1]) {
            if (stage) *stage = plan->chunk_stage[c];
            return c;
        }
    return vs_set_error(VS_ERR_INVALID, "vs_pipe_unit_chunk: unit %d is in no chunk (a plan not from vs_pipe_split?)",
                        unit), -1;
}

// >>pipe-sched -----------------------------------------------------------------

struct vs_pipe_sched {
    uint32_t magic; // _VS_SCHED_LIVE
    const vs_world* world;
    int stages, nchunks, mbs;
    int chunk_stage[VS_PIPE_MAX_CHUNKS];
    int len[VS_PIPE_MAX_CHUNKS], cap[VS_PIPE_MAX_CHUNKS];
    vs_pipe_instr* ins[VS_PIPE_MAX_CHUNKS];
    uint64_t version; // bumped by every push, so an engine re-validates a changed schedule
};

VS_API vs_result vs_pipe_sched_new(const vs_world* world, int stages, int nchunks, const int* chunk_stage,
                                   int mbs, vs_pipe_sched** out)
{
    if (!out) return vs_set_error(VS_ERR_NULL, "vs_pipe_sched_new: out is NULL");
    *out = NULL;
    if (stages < 1 || stages > VS_PIPE_MAX_CHUNKS)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_sched_new: stages = %d (1..%d)", stages, VS_PIPE_MAX_CHUNKS);
    if (nchunks < stages || nchunks > VS_PIPE_MAX_CHUNKS)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_sched_new: nchunks = %d (%d stages .. %d)", nchunks, stages,
                            VS_PIPE_MAX_CHUNKS);
    if (mbs < 1 || mbs > VS_PIPE_MAX_MBS)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_sched_new: microbatch count %d (1..%d, VS_PIPE_MAX_MBS)", mbs,
                            VS_PIPE_MAX_MBS);
    int used[VS_PIPE_MAX_CHUNKS] = {0};
    for (int k = 0; k < nchunks; k++) {
        int st = chunk_stage ? chunk_stage[k] : k % stages;
        if (st < 0 || st >= stages)
            return vs_set_error(VS_ERR_INVALID, "vs_pipe_sched_new: chunk_stage[%d] = %d (0..%d)", k, st, stages - 1);
        used[st] = 1;
    }
    for (int st = 0; st < stages; st++)
        if (!used[st]) return vs_set_error(VS_ERR_INVALID, "vs_pipe_sched_new: stage %d holds no chunk", st);
    vs_pipe_sched* s = _VS_PIPE_NEW(world, vs_pipe_sched, 1);
    if (!s) return vs_set_error(VS_ERR_NOMEM, "vs_pipe_sched_new: out of memory");
    s->magic = _VS_SCHED_LIVE;
    s->world = world;
    s->stages = stages;
    s->nchunks = nchunks;
    s->mbs = mbs;
    for (int k = 0; k < nchunks; k++) s->chunk_stage[k] = chunk_stage ? chunk_stage[k] : k % stages;
    *out = s;
    return VS_OK;
}

_VS_PIPE_PRIVATE const char* _vs_pipe_op_text(int op)
{
    static const char* const t[VS_PIPE_OP_COUNT] = {"NOP", "F", "B", "W", "BW", "SF", "RF", "SB", "RB", "SYNC", "STEP"};
    return op >= 0 && op < VS_PIPE_OP_COUNT ? t[op] : "?";
}

VS_API vs_result vs_pipe_sched_push(vs_pipe_sched* s, int stage, vs_pipe_op op, int chunk, int mb)
{
    _VS_TRY(_VS_SCHED_GONE("vs_pipe_sched_push", s));
    if (!s) return vs_set_error(VS_ERR_NULL, "vs_pipe_sched_push: schedule is NULL");
    if (stage < 0 || stage >= s->stages)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_sched_push: stage %d (0..%d)", stage, s->stages - 1);
    if ((int)op <= VS_PIPE_NOP || (int)op >= VS_PIPE_OP_COUNT)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_sched_push: op %d is not a vs_pipe_op", (int)op);
    if (op == VS_PIPE_STEP) chunk = 0, mb = 0;
    if (op == VS_PIPE_SYNC) mb = 0;
    if (chunk < 0 || chunk >= s->nchunks)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_sched_push: %s chunk %d (0..%d)", _vs_pipe_op_text(op), chunk,
                            s->nchunks - 1);
    if (mb < 0 || mb >= s->mbs)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_sched_push: %s microbatch %d (0..%d)", _vs_pipe_op_text(op), mb,
                            s->mbs - 1);
    if (s->len[stage] == s->cap[stage]) {
        int nc = s->cap[stage] ? 2 * s->cap[stage] : 64;
        vs_pipe_instr* n = _VS_PIPE_NEW(s->world, vs_pipe_instr, nc);
        if (!n) return vs_set_error(VS_ERR_NOMEM, "vs_pipe_sched_push: out of memory");
        if (s->len[stage]) memcpy(n, s->ins[stage], (size_t)s->len[stage] * sizeof *n);
        vs_free(s->world, s->ins[stage]);
        s->ins[stage] = n;
        s->cap[stage] = nc;
    }
    s->version++;
    vs_pipe_instr* i = &s->ins[stage][s->len[stage]++];
    i->op = (int)op;
    i->chunk = chunk;
    i->mb = mb;
    return VS_OK;
}

/* The getters' check: VS_OK for a live schedule, else the error (named). */
#define _VS_SCHED_GET(fn, s) \
    ((s) ? _VS_SCHED_GONE(fn, s) : vs_set_error(VS_ERR_NULL, "%s: schedule is NULL", fn))
VS_API int vs_pipe_sched_stages(const vs_pipe_sched* s)
{
    _VS_TRY(_VS_SCHED_GET("vs_pipe_sched_stages", s));
    return s->stages;
}
VS_API int vs_pipe_sched_nchunks(const vs_pipe_sched* s)
{
    _VS_TRY(_VS_SCHED_GET("vs_pipe_sched_nchunks", s));
    return s->nchunks;
}
VS_API int vs_pipe_sched_mbs(const vs_pipe_sched* s)
{
    _VS_TRY(_VS_SCHED_GET("vs_pipe_sched_mbs", s));
    return s->mbs;
}
VS_API int vs_pipe_sched_chunk_stage(const vs_pipe_sched* s, int chunk)
{
    _VS_TRY(_VS_SCHED_GET("vs_pipe_sched_chunk_stage", s));
    if (chunk < 0 || chunk >= s->nchunks)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_sched_chunk_stage: chunk %d (0..%d)", chunk, s->nchunks - 1);
    return s->chunk_stage[chunk];
}
VS_API int vs_pipe_sched_len(const vs_pipe_sched* s, int stage)
{
    _VS_TRY(_VS_SCHED_GET("vs_pipe_sched_len", s));
    if (stage < 0 || stage >= s->stages)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_sched_len: stage %d (0..%d)", stage, s->stages - 1);
    return s->len[stage];
}

VS_API vs_result vs_pipe_sched_at(const vs_pipe_sched* s, int stage, int i, vs_pipe_instr* out)
{
    _VS_TRY(_VS_SCHED_GONE("vs_pipe_sched_at", s));
    if (!s || !out) return vs_set_error(VS_ERR_NULL, "vs_pipe_sched_at: %s is NULL", s ? "out" : "schedule");
    if (stage < 0 || stage >= s->stages)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_sched_at: stage %d (0..%d)", stage, s->stages - 1);
    if (i < 0 || i >= s->len[stage])
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_sched_at: position %d on stage %d (0..%d)", i, stage,
                            s->len[stage] - 1);
    *out = s->ins[stage][i];
    return VS_OK;
}

/* Freed schedules made without a world: with no world to keep them readable
   (vs_free_later), the freeing thread keeps its last _VS_PIPE_KEPT, so a second
   free or a call on one reads the mark, as with a world's. Per thread, as
   vs_last_error: nothing is shared between threads or meshes; the oldest is
   released when a newer one comes, the rest when the thread ends (the key's
   destructor; the main thread's at exit are still reachable from it). */
#define _VS_PIPE_KEPT 16
typedef struct _vs_pipe_kept {
    void* h[_VS_PIPE_KEPT];
    int next, armed; // armed: the key's destructor will release them
} _vs_pipe_kept;
_VS_PIPE_PRIVATE void _vs_pipe_kept_end(void* arg)
{
    _vs_pipe_kept* k = (_vs_pipe_kept*)arg;
    for (int i = 0; i < _VS_PIPE_KEPT; i++) vs_free(NULL, k->h[i]), k->h[i] = NULL;
    k->armed = 0;
}
// (set once per process by pthread_once, read-only after: not state two meshes could share)
_VS_PIPE_PRIVATE pthread_key_t _vs_pipe_kept_key;
_VS_PIPE_PRIVATE int _vs_pipe_kept_keyed;
_VS_PIPE_PRIVATE void _vs_pipe_kept_key_make(void)
{
    _vs_pipe_kept_keyed = pthread_key_create(&_vs_pipe_kept_key, _vs_pipe_kept_end) == 0;
}
_VS_PIPE_PRIVATE void _vs_pipe_keep(void* h)
{
    static _VS_TLS _vs_pipe_kept k;
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (!k.armed) {
        pthread_once(&once, _vs_pipe_kept_key_make);
        k.armed = _vs_pipe_kept_keyed && pthread_setspecific(_vs_pipe_kept_key, &k) == 0;
    }
    vs_free(NULL, k.h[k.next]);
    k.h[k.next] = h;
    k.next = (k.next + 1) % _VS_PIPE_KEPT;
}

/* Frees a schedule now (the candidates vs_pipe_generate throws away), or, for
   one the caller had, later: marked freed, its memory kept by vs_free_later
   (no world: by _vs_pipe_keep). */
_VS_PIPE_PRIVATE void _vs_pipe_sched_release(vs_pipe_sched* s, int later)
{
    for (int st = 0; st < s->stages; st++) vs_free(s->world, s->ins[st]);
    s->magic = _VS_PIPE_DEAD;
    if (!later) vs_free(s->world, s);
    else if (s->world) vs_free_later(s->world, s);
    else _vs_pipe_keep(s);
}

VS_API vs_result vs_pipe_sched_free(vs_pipe_sched* s)
{
    if (!s) return VS_OK;
    _VS_TRY(_VS_SCHED_GONE("vs_pipe_sched_free", s));
    _vs_pipe_sched_release(s, 1);
    return VS_OK;
}

/* The text of one instruction ("F3.1", "SYNC2", "STEP") into buf[24]. */
_VS_PIPE_PRIVATE const char* _vs_pipe_itext(const vs_pipe_instr* i, char* buf)
{
    if (i->op == VS_PIPE_STEP) snprintf(buf, 24, "STEP");
    else if (i->op == VS_PIPE_SYNC) snprintf(buf, 24, "SYNC%d", i->chunk);
    else snprintf(buf, 24, "%s%d.%d", _vs_pipe_op_text(i->op), i->chunk, i->mb);
    return buf;
}

/* The print functions' buffer contract: buf may be NULL only when cap is 0. */
_VS_PIPE_PRIVATE int _vs_pipe_bad_buf(const char* fn, const char* buf, size_t cap)
{
    if (buf || !cap) return 0;
    vs_set_error(VS_ERR_NULL, "%s: buf is NULL with cap %zu (NULL only with cap 0)", fn, cap);
    return 1;
}

VS_API int vs_pipe_sched_print(const vs_pipe_sched* s, char* buf, size_t cap)
{
    size_t len = 0;
    if (buf && cap) buf[0] = 0;
    if (_VS_SCHED_GET("vs_pipe_sched_print", s) || _vs_pipe_bad_buf("vs_pipe_sched_print", buf, cap)) return -1;
    _vs_pipe_cat(buf, cap, &len, "pipe stages=%d chunks=%d mbs=%d place=", s->stages, s->nchunks, s->mbs);
    for (int k = 0; k < s->nchunks; k++) _vs_pipe_cat(buf, cap, &len, "%s%d", k ? "," : "", s->chunk_stage[k]);
    _vs_pipe_cat(buf, cap, &len, "\n");
    for (int st = 0; st < s->stages; st++) {
        _vs_pipe_cat(buf, cap, &len, "%d:", st);
        char t[24];
        for (int i = 0; i < s->len[st]; i++) _vs_pipe_cat(buf, cap, &len, " %s", _vs_pipe_itext(&s->ins[st][i], t));
        _vs_pipe_cat(buf, cap, &len, "\n");
    }
    return len > (size_t)INT_MAX ? INT_MAX : (int)len;
}

/* One token of the text form: op letters, then chunk[.mb]. */
_VS_PIPE_PRIVATE int _vs_pipe_parse_instr(const char* tok, size_t n, vs_pipe_instr* out)
{
    static const char* const ops[] = {"STEP", "SYNC", "BW", "SF", "RF", "SB", "RB", "F", "B", "W"};
    static const int codes[] = {VS_PIPE_STEP, VS_PIPE_SYNC, VS_PIPE_BW, VS_PIPE_SEND_F, VS_PIPE_RECV_F,
                                VS_PIPE_SEND_B, VS_PIPE_RECV_B, VS_PIPE_F, VS_PIPE_B, VS_PIPE_W};
    for (int k = 0; k < 10; k++) {
        size_t l = strlen(ops[k]);
        if (n < l || strncmp(tok, ops[k], l)) continue;
        const char* p = tok + l;
        const char* end = tok + n;
        out->op = codes[k];
        out->chunk = out->mb = 0;
        if (codes[k] == VS_PIPE_STEP) return p == end;
        long v[2] = {0, 0};
        int want = codes[k] == VS_PIPE_SYNC ? 1 : 2;
        for (int f = 0; f < want; f++) {
            if (f && (p >= end || *p++ != '.')) return 0;
            if (p >= end || *p < '0' || *p > '9') return 0;
            while (p < end && *p >= '0' && *p <= '9') {
                v[f] = v[f] * 10 + (*p++ - '0');
                if (v[f] > 1000000000L) return 0;
            }
        }
        if (p != end) return 0;
        out->chunk = (int)v[0];
        out->mb = (int)v[1];
        return 1;
    }
    return 0;
}

VS_API vs_result vs_pipe_sched_parse(const vs_world* world, const char* text, vs_pipe_sched** out)
{
    if (!text || !out) return vs_set_error(VS_ERR_NULL, "vs_pipe_sched_parse: %s is NULL", text ? "out" : "text");
    *out = NULL;
    vs_pipe_sched* s = NULL;
    int line = 0, stages = 0, nchunks = 0, mbs = 0, place[VS_PIPE_MAX_CHUNKS];
    int seen[VS_PIPE_MAX_CHUNKS] = {0};
    const char* p = text;
    vs_result r = VS_OK;
    while (*p) {
        const char* e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        line++;
        const char* q = p;
        const char* end = p + n;
        p = e ? e + 1 : p + n;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\r')) q++;
        if (q == end || *q == '#') continue;
        if (!s) { // the header line
            static const char* const keys[3] = {"pipe stages=", " chunks=", " mbs="};
            int* const vals[3] = {&stages, &nchunks, &mbs};
            const char* h = q;
            for (int k = 0; k < 3 && !r; k++) {
                size_t kl = strlen(keys[k]);
                char* he;
                long v = 0;
                if ((size_t)(end - h) <= kl || strncmp(h, keys[k], kl) || (v = strtol(h + kl, &he, 10), he == h + kl))
                    r = vs_set_error(VS_ERR_INVALID,
                                     "vs_pipe_sched_parse: line %d: expected \"pipe stages=P chunks=K mbs=M place=s0,s1,...\"",
                                     line);
                else if (v < INT_MIN || v > INT_MAX)
                    r = vs_set_error(VS_ERR_INVALID, "vs_pipe_sched_parse: line %d: %s%.*s is out of range", line,
                                     keys[k] + (k > 0), (int)(he - h - kl), h + kl);
                else *vals[k] = (int)v, h = he;
            }
            if (!r && ((size_t)(end - h) < 7 || strncmp(h, " place=", 7)))
                r = vs_set_error(VS_ERR_INVALID,
                                 "vs_pipe_sched_parse: line %d: expected \"pipe stages=P chunks=K mbs=M place=s0,s1,...\"",
                                 line);
            if (r) goto fail;
            const int used = (int)(h + 7 - q);
            if (nchunks < 1 || nchunks > VS_PIPE_MAX_CHUNKS) {
                r = vs_set_error(VS_ERR_INVALID, "vs_pipe_sched_parse: line %d: chunks=%d (1..%d)", line, nchunks,
                                 VS_PIPE_MAX_CHUNKS);
                goto fail;
            }
            const char* c = q + used;
            for (int k = 0; k < nchunks; k++) {
                char* ce;
                long v = strtol(c, &ce, 10);
                if (ce == c || ce > end || (k + 1 < nchunks && *ce != ',') || v < 0 || v > VS_PIPE_MAX_CHUNKS) {
                    r = vs_set_error(VS_ERR_INVALID, "vs_pipe_sched_parse: line %d: place= needs %d stage numbers",
                                     line, nchunks);
                    goto fail;
                }
                place[k] = (int)v;
                c = ce + (k + 1 < nchunks);
            }
            r = vs_pipe_sched_new(world, stages, nchunks, place, mbs, &s);
            if (r) {
                r = vs_set_error(r, "vs_pipe_sched_parse: line %d: %s", line, vs_last_error());
                goto fail;
            }
            continue;
        }
        char* ce;
        long st = strtol(q, &ce, 10);
        if (ce == q || *ce != ':' || st < 0 || st >= stages) {
            const char* te = q;
            while (te < end && *te != ' ' && *te != '\t') te++;
            r = vs_set_error(VS_ERR_INVALID, "vs_pipe_sched_parse: line %d: \"%.*s\": expected \"<stage 0..%d>:\"", line,
                             (int)(te - q), q, stages - 1);
            goto fail;
        }
        if (seen[st]++) {
            r = vs_set_error(VS_ERR_INVALID, "vs_pipe_sched_parse: line %d: stage %ld listed twice", line, st);
            goto fail;
        }
        q = ce + 1;
        for (;;) {
            while (q < end && (*q == ' ' || *q == '\t' || *q == '\r')) q++;
            if (q >= end) break;
            const char* t = q;
            while (q < end && *q != ' ' && *q != '\t' && *q != '\r') q++;
            vs_pipe_instr in;
            if (!_vs_pipe_parse_instr(t, (size_t)(q - t), &in)) {
                r = vs_set_error(VS_ERR_INVALID, "vs_pipe_sched_parse: line %d: bad instruction \"%.*s\"", line,
                                 (int)(q - t), t);
                goto fail;
            }
            r = vs_pipe_sched_push(s, (int)st, (vs_pipe_op)in.op, in.chunk, in.mb);
            if (r) {
                r = vs_set_error(r, "vs_pipe_sched_parse: line %d: \"%.*s\": %s", line, (int)(q - t), t,
                                 vs_last_error());
                goto fail;
            }
        }
    }
    if (!s) return vs_set_error(VS_ERR_INVALID, "vs_pipe_sched_parse: no \"pipe stages=...\" header line");
    *out = s;
    return VS_OK;
fail:
    if (s) _vs_pipe_sched_release(s, 0);
    return r;
}

/* The message that instruction (op, c, m) sends or receives, as the sender names
   it: kind 0 activations of chunk x, kind 1 input gradients of chunk x. */
typedef struct _vs_pipe_msg {
    int kind, chunk, mb;
} _vs_pipe_msg;

VS_API vs_result vs_pipe_sched_add_comm(vs_pipe_sched* s)
{
    _VS_TRY(_VS_SCHED_GONE("vs_pipe_sched_add_comm", s));
    if (!s) return vs_set_error(VS_ERR_NULL, "vs_pipe_sched_add_comm: schedule is NULL");
    for (int st = 0; st < s->stages; st++)
        for (int i = 0; i < s->len[st]; i++)
            if (s->ins[st][i].op >= VS_PIPE_SEND_F && s->ins[st][i].op <= VS_PIPE_RECV_B) return VS_OK;
    const int P = s->stages, K = s->nchunks;
    /* Per stage: what it sends, in list order, to whom. */
    _vs_pipe_msg** sent = _VS_PIPE_NEW(s->world, _vs_pipe_msg*, P);
    int** to = _VS_PIPE_NEW(s->world, int*, P);
    int* nsent = _VS_PIPE_NEW(s->world, int, P);
    int* taken = _VS_PIPE_NEW(s->world, int, (size_t)P * (size_t)P); // [dst*P+src]: how far dst has received
    vs_pipe_instr** old = _VS_PIPE_NEW(s->world, vs_pipe_instr*, P);
    int* oldlen = _VS_PIPE_NEW(s->world, int, P);
    vs_result r = VS_OK;
    if (!sent || !to || !nsent || !taken || !old || !oldlen) goto nomem;
    for (int st = 0; st < P; st++) {
        sent[st] = _VS_PIPE_NEW(s->world, _vs_pipe_msg, 2 * s->len[st] + 1);
        to[st] = _VS_PIPE_NEW(s->world, int, 2 * s->len[st] + 1);
        if (!sent[st] || !to[st]) goto nomem;
        for (int i = 0; i < s->len[st]; i++) {
            const vs_pipe_instr* in = &s->ins[st][i];
            if (in->op == VS_PIPE_F && in->chunk + 1 < K && s->chunk_stage[in->chunk + 1] != st) {
                _vs_pipe_msg m = {0, in->chunk, in->mb};
                to[st][nsent[st]] = s->chunk_stage[in->chunk + 1];
                sent[st][nsent[st]++] = m;
            }
            if ((in->op == VS_PIPE_B || in->op == VS_PIPE_BW) && in->chunk > 0 &&
                s->chunk_stage[in->chunk - 1] != st) {
                _vs_pipe_msg m = {1, in->chunk, in->mb};
                to[st][nsent[st]] = s->chunk_stage[in->chunk - 1];
                sent[st][nsent[st]++] = m;
            }
        }
    }
    for (int st = 0; st < P; st++) { // rebuild each list
        old[st] = s->ins[st];
        oldlen[st] = s->len[st];
        s->ins[st] = NULL;
        s->len[st] = s->cap[st] = 0;
    }
    for (int st = 0; st < P && !r; st++) {
        for (int i = 0; i < oldlen[st] && !r; i++) {
            const vs_pipe_instr* in = &old[st][i];
            int c = in->chunk, need_src = -1;
            _vs_pipe_msg need = {0, 0, 0};
            if (in->op == VS_PIPE_F && c > 0 && s->chunk_stage[c - 1] != st) {
                need_src = s->chunk_stage[c - 1];
                need.kind = 0, need.chunk = c - 1, need.mb = in->mb;
            }
            if ((in->op == VS_PIPE_B || in->op == VS_PIPE_BW) && c + 1 < K && s->chunk_stage[c + 1] != st) {
                need_src = s->chunk_stage[c + 1];
                need.kind = 1, need.chunk = c + 1, need.mb = in->mb;
            }
            if (need_src >= 0) { // receive, in the sender's order, everything up to the one needed
                int* t = &taken[st * P + need_src];
                int found = -1;
                for (int j = *t; j < nsent[need_src]; j++)
                    if (to[need_src][j] == st && sent[need_src][j].kind == need.kind &&
                        sent[need_src][j].chunk == need.chunk && sent[need_src][j].mb == need.mb) {
                        found = j;
                        break;
                    }
                for (int j = *t; found >= 0 && j <= found && !r; j++) {
                    if (to[need_src][j] != st) continue;
                    const _vs_pipe_msg* m = &sent[need_src][j];
                    r = m->kind == 0 ? vs_pipe_sched_push(s, st, VS_PIPE_RECV_F, m->chunk + 1, m->mb)
                                     : vs_pipe_sched_push(s, st, VS_PIPE_RECV_B, m->chunk - 1, m->mb);
                }
                if (found >= 0) *t = found + 1;
            }
            if (!r) r = vs_pipe_sched_push(s, st, (vs_pipe_op)in->op, in->chunk, in->mb);
            if (!r && in->op == VS_PIPE_F && c + 1 < K && s->chunk_stage[c + 1] != st)
                r = vs_pipe_sched_push(s, st, VS_PIPE_SEND_F, c, in->mb);
            if (!r && (in->op == VS_PIPE_B || in->op == VS_PIPE_BW) && c > 0 && s->chunk_stage[c - 1] != st)
                r = vs_pipe_sched_push(s, st, VS_PIPE_SEND_B, c, in->mb);
        }
    }
    for (int st = 0; st < P; st++) vs_free(s->world, old[st]);
    goto done;
nomem:
    r = vs_set_error(VS_ERR_NOMEM, "vs_pipe_sched_add_comm: out of memory");
done:
    for (int st = 0; st < P && sent && to; st++) {
        vs_free(s->world, sent[st]);
        vs_free(s->world, to[st]);
    }
    vs_free(s->world, sent);
    vs_free(s->world, to);
    vs_free(s->world, nsent);
    vs_free(s->world, taken);
    vs_free(s->world, old);
    vs_free(s->world, oldlen);
    return r;
}

/* The validator's state: which parts of each (chunk, mb) have run, and the
   messages in flight between each pair of stages (FIFO, as p2p is). */
typedef struct _vs_pipe_vstate {
    const vs_pipe_sched* s;
    unsigned char* done;  // [(c*M+m)]: bit 0 F, 1 B, 2 W, 3 RF, 4 RB, 5 SF, 6 SB
    int* next_b;          // per chunk: the next microbatch its B/BW must be
    int* next_w;          // per chunk: the next microbatch its W must be
    int* synced;          // per chunk
    _vs_pipe_msg* q;      // pair (src*P+dst)'s messages from q[qoff[pair]]
    int* qoff;            // per pair
    int* qhead;
    int* qtail;
    int* pc;              // per stage
    int* live;            // per stage
} _vs_pipe_vstate;

enum { _VS_VF = 1, _VS_VB = 2, _VS_VW = 4, _VS_VRF = 8, _VS_VRB = 16, _VS_VSF = 32, _VS_VSB = 64 };

/* "stage 1, position 7 (W0.3): <rule>; around: F0.2 SF0.2 [W0.3] B0.3" */
_VS_PIPE_PRIVATE _VS_PRINTF(4, 5) vs_result _vs_pipe_vfail(const vs_pipe_sched* s, int st, int pos, const char* fmt, ...)
{
    char rule[256], around[256], t[24];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rule, sizeof rule, fmt, ap);
    va_end(ap);
    size_t len = 0;
    around[0] = 0;
    int lo = pos - 4 < 0 ? 0 : pos - 4, hi = pos + 4 >= s->len[st] ? s->len[st] - 1 : pos + 4;
    for (int i = lo; i <= hi; i++)
        _vs_pipe_cat(around, sizeof around, &len, "%s%s%s%s", i > lo ? " " : "", i == pos ? "[" : "",
                     _vs_pipe_itext(&s->ins[st][i], t), i == pos ? "]" : "");
    return vs_set_error(VS_ERR_INVALID, "schedule: stage %d, position %d (%s): %s; around: %s", st, pos,
                        _vs_pipe_itext(&s->ins[st][pos], t), rule, around);
}

/* Runs instruction pc of stage st if it can: 1 ran, 0 blocked (a receive whose
   message has not been sent yet), <0 a broken rule (message set). */
_VS_PIPE_PRIVATE int _vs_pipe_vstep(_vs_pipe_vstate* v, int st, const vs_pipe_check_desc* d)
{
    const vs_pipe_sched* s = v->s;
    const int P = s->stages, K = s->nchunks, M = s->mbs;
    const int pos = v->pc[st];
    const vs_pipe_instr* in = &s->ins[st][pos];
    const int c = in->chunk, m = in->mb;
    unsigned char* dn = &v->done[c * M + m];
    char t[24];
    if (in->op != VS_PIPE_STEP && s->chunk_stage[c] != st)
        return _vs_pipe_vfail(s, st, pos, "chunk %d runs on stage %d, not here", c, s->chunk_stage[c]), -1;
    int prev_remote = c > 0 && s->chunk_stage[c - 1] != st;
    int next_remote = c + 1 < K && s->chunk_stage[c + 1] != st;
    switch (in->op) {
    case VS_PIPE_F:
        if (*dn & _VS_VF) return _vs_pipe_vfail(s, st, pos, "a second forward of chunk %d, microbatch %d", c, m), -1;
        if (c > 0 && !prev_remote && !(v->done[(c - 1) * M + m] & _VS_VF))
            return _vs_pipe_vfail(s, st, pos, "needs F%d.%d first (same stage, earlier in the list)", c - 1, m), -1;
        if (prev_remote && !(*dn & _VS_VRF))
            return _vs_pipe_vfail(s, st, pos, "its input was not received (RF%d.%d before it)", c, m), -1;
        *dn |= _VS_VF;
        if (++v->live[st] > 0 && d && d->max_live_activations > 0 && v->live[st] > d->max_live_activations)
            return _vs_pipe_vfail(s, st, pos, "%d activations held, the bound is %lld", v->live[st],
                                  (long long)d->max_live_activations),
                   -1;
        return 1;
    case VS_PIPE_B:
    case VS_PIPE_BW:
        if (!(*dn & _VS_VF)) return _vs_pipe_vfail(s, st, pos, "backward before the forward F%d.%d", c, m), -1;
        if (*dn & _VS_VB) return _vs_pipe_vfail(s, st, pos, "a second backward of chunk %d, microbatch %d", c, m), -1;
        if (c + 1 < K && !next_remote && !(v->done[(c + 1) * M + m] & _VS_VB))
            return _vs_pipe_vfail(s, st, pos, "needs the backward of chunk %d, microbatch %d first", c + 1, m), -1;
        if (next_remote && !(*dn & _VS_VRB))
            return _vs_pipe_vfail(s, st, pos, "its output gradient was not received (RB%d.%d before it)", c, m), -1;
        if (m != v->next_b[c])
            return _vs_pipe_vfail(s, st, pos,
                                  "backwards of chunk %d must run in microbatch order (next is %d), so gradients "
                                  "accumulate as on one device",
                                  c, v->next_b[c]),
                   -1;
        v->next_b[c]++;
        *dn |= _VS_VB;
        if (in->op == VS_PIPE_BW) {
            if (v->next_w[c] != m)
                return _vs_pipe_vfail(s, st, pos, "weight gradients of chunk %d out of microbatch order (next is %d)",
                                      c, v->next_w[c]),
                       -1;
            v->next_w[c]++;
            *dn |= _VS_VW;
            v->live[st]--;
        }
        return 1;
    case VS_PIPE_W:
        if (!(*dn & _VS_VB)) return _vs_pipe_vfail(s, st, pos, "W before its B%d.%d", c, m), -1;
        if (*dn & _VS_VW) return _vs_pipe_vfail(s, st, pos, "a second weight gradient of chunk %d, microbatch %d", c, m), -1;
        if (m != v->next_w[c])
            return _vs_pipe_vfail(s, st, pos, "weight gradients of chunk %d must run in microbatch order (next is %d)",
                                  c, v->next_w[c]),
                   -1;
        v->next_w[c]++;
        *dn |= _VS_VW;
        v->live[st]--;
        return 1;
    case VS_PIPE_SEND_F:
    case VS_PIPE_SEND_B: {
        int fwd = in->op == VS_PIPE_SEND_F;
        if (fwd ? !next_remote : !prev_remote)
            return _vs_pipe_vfail(s, st, pos, "chunk %d has no %s chunk on another stage to send to", c,
                                  fwd ? "next" : "previous"),
                   -1;
        if (!(*dn & (fwd ? _VS_VF : _VS_VB)))
            return _vs_pipe_vfail(s, st, pos, "sends before its %s%d.%d ran", fwd ? "F" : "B", c, m), -1;
        if (*dn & (fwd ? _VS_VSF : _VS_VSB)) return _vs_pipe_vfail(s, st, pos, "sent twice"), -1;
        *dn |= fwd ? _VS_VSF : _VS_VSB;
        int dst = s->chunk_stage[fwd ? c + 1 : c - 1];
        int pair = st * P + dst;
        _vs_pipe_msg msg = {fwd ? 0 : 1, c, m};
        v->q[v->qoff[pair] + v->qtail[pair]++] = msg;
        return 1;
    }
    case VS_PIPE_RECV_F:
    case VS_PIPE_RECV_B: {
        int fwd = in->op == VS_PIPE_RECV_F;
        if (fwd ? !prev_remote : !next_remote)
            return _vs_pipe_vfail(s, st, pos, "chunk %d has no %s chunk on another stage to receive from", c,
                                  fwd ? "previous" : "next"),
                   -1;
        if (*dn & (fwd ? _VS_VRF : _VS_VRB)) return _vs_pipe_vfail(s, st, pos, "received twice"), -1;
        int src = s->chunk_stage[fwd ? c - 1 : c + 1];
        int pair = src * P + st;
        if (v->qhead[pair] == v->qtail[pair]) return 0; // not sent yet: wait
        _vs_pipe_msg* h = &v->q[v->qoff[pair] + v->qhead[pair]];
        int want_chunk = fwd ? c - 1 : c + 1;
        if (h->kind != (fwd ? 0 : 1) || h->chunk != want_chunk || h->mb != m) {
            vs_pipe_instr sent_as = {h->kind ? VS_PIPE_SEND_B : VS_PIPE_SEND_F, h->chunk, h->mb};
            return _vs_pipe_vfail(s, st, pos,
                                  "sends and receives cross: stage %d sends %s to this stage before what this "
                                  "receive expects (%s%d.%d)",
                                  src, _vs_pipe_itext(&sent_as, t), fwd ? "SF" : "SB", want_chunk, m),
                   -1;
        }
        v->qhead[pair]++;
        *dn |= fwd ? _VS_VRF : _VS_VRB;
        return 1;
    }
    case VS_PIPE_SYNC:
        if (v->synced[c]) return _vs_pipe_vfail(s, st, pos, "chunk %d synced twice", c), -1;
        if (v->next_w[c] != M)
            return _vs_pipe_vfail(s, st, pos, "chunk %d still has backwards to run (microbatch %d)", c, v->next_w[c]),
                   -1;
        v->synced[c] = 1;
        return 1;
    case VS_PIPE_STEP:
        if (pos != s->len[st] - 1) return _vs_pipe_vfail(s, st, pos, "STEP must be the stage's last instruction"), -1;
        for (int k = 0; k < K; k++)
            if (s->chunk_stage[k] == st && v->next_w[k] != M)
                return _vs_pipe_vfail(s, st, pos, "chunk %d still has backwards to run (microbatch %d)", k,
                                      v->next_w[k]),
                       -1;
        return 1;
    default:
        return _vs_pipe_vfail(s, st, pos, "unknown op %d", in->op), -1;
    }
}

/* 1: schedule s has no instruction of a backward pass (stage st, or any: -1). */
_VS_PIPE_PRIVATE int _vs_pipe_fwd_only(const vs_pipe_sched* s, int st)
{
    for (int g = st < 0 ? 0 : st; g < (st < 0 ? s->stages : st + 1); g++)
        for (int i = 0; i < s->len[g]; i++) {
            int op = s->ins[g][i].op;
            if (op != VS_PIPE_F && op != VS_PIPE_SEND_F && op != VS_PIPE_RECV_F && op != VS_PIPE_NOP) return 0;
        }
    return 1;
}

VS_API vs_result vs_pipe_sched_forward(const vs_pipe_sched* s, vs_pipe_sched** out)
{
    _VS_TRY(_VS_SCHED_GONE("vs_pipe_sched_forward", s));
    if (!s || !out) return vs_set_error(VS_ERR_NULL, "vs_pipe_sched_forward: %s is NULL", s ? "out" : "schedule");
    *out = NULL;
    vs_pipe_sched* f = NULL;
    vs_result r = vs_pipe_sched_new(s->world, s->stages, s->nchunks, s->chunk_stage, s->mbs, &f);
    for (int st = 0; st < s->stages && !r; st++)
        for (int i = 0; i < s->len[st] && !r; i++)
            if (s->ins[st][i].op == VS_PIPE_F) r = vs_pipe_sched_push(f, st, VS_PIPE_F, s->ins[st][i].chunk, s->ins[st][i].mb);
    if (!r) r = vs_pipe_sched_add_comm(f);
    if (!r) r = vs_pipe_sched_check(f, NULL);
    if (r) {
        vs_pipe_sched_free(f);
        return vs_set_error(r, "vs_pipe_sched_forward: %s", vs_last_error());
    }
    *out = f;
    return VS_OK;
}

VS_API vs_result vs_pipe_sched_check(const vs_pipe_sched* s, const vs_pipe_check_desc* d)
{
    _VS_TRY(_VS_SCHED_GONE("vs_pipe_sched_check", s));
    if (!s) return vs_set_error(VS_ERR_NULL, "vs_pipe_sched_check: schedule is NULL");
    if (d && d->max_live_activations < 0)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_sched_check: max_live_activations = %lld (0: no bound, else >= 1)",
                            (long long)d->max_live_activations);
    const int P = s->stages, K = s->nchunks, M = s->mbs;
    const int fwd = _vs_pipe_fwd_only(s, -1); // (a forward-only schedule: no B or W to find)
    _vs_pipe_vstate v;
    memset(&v, 0, sizeof v);
    v.s = s;
    v.qoff = _VS_PIPE_NEW(s->world, int, P * P + 1);
    int total = 0;
    for (int st = 0; st < P && v.qoff; st++) // room for every send a pair may carry
        for (int i = 0; i < s->len[st]; i++) {
            const vs_pipe_instr* in = &s->ins[st][i];
            int to = in->op == VS_PIPE_SEND_F && in->chunk + 1 < K   ? s->chunk_stage[in->chunk + 1]
                     : in->op == VS_PIPE_SEND_B && in->chunk > 0 ? s->chunk_stage[in->chunk - 1]
                                                                 : -1;
            if (to >= 0) v.qoff[st * P + to + 1]++, total++;
        }
    for (int pair = 0; pair < P * P && v.qoff; pair++) v.qoff[pair + 1] += v.qoff[pair];
    v.done = _VS_PIPE_NEW(s->world, unsigned char, (size_t)K * (size_t)M);
    v.next_b = _VS_PIPE_NEW(s->world, int, K);
    v.next_w = _VS_PIPE_NEW(s->world, int, K);
    v.synced = _VS_PIPE_NEW(s->world, int, K);
    v.q = _VS_PIPE_NEW(s->world, _vs_pipe_msg, total);
    v.qhead = _VS_PIPE_NEW(s->world, int, P * P);
    v.qtail = _VS_PIPE_NEW(s->world, int, P * P);
    v.pc = _VS_PIPE_NEW(s->world, int, P);
    v.live = _VS_PIPE_NEW(s->world, int, P);
    vs_result r = VS_OK;
    if (!v.qoff || !v.done || !v.next_b || !v.next_w || !v.synced || !v.q || !v.qhead || !v.qtail || !v.pc || !v.live) {
        r = vs_set_error(VS_ERR_NOMEM, "vs_pipe_sched_check: out of memory");
        goto done;
    }
    for (;;) { // run every stage as far as it goes until none can move
        int moved = 0, left = 0;
        for (int st = 0; st < P; st++) {
            while (v.pc[st] < s->len[st]) {
                int k = _vs_pipe_vstep(&v, st, d);
                if (k < 0) {
                    r = VS_ERR_INVALID;
                    goto done;
                }
                if (!k) break;
                v.pc[st]++;
                moved = 1;
            }
            left += v.pc[st] < s->len[st];
        }
        if (!left) break;
        if (!moved) { // every stage left waits on a receive: a cycle of waits
            char who[512], t[24];
            size_t len = 0;
            who[0] = 0;
            int first = -1;
            for (int st = 0; st < P; st++) {
                if (v.pc[st] >= s->len[st]) continue;
                if (first < 0) first = st;
                const vs_pipe_instr* in = &s->ins[st][v.pc[st]];
                int src = s->chunk_stage[in->op == VS_PIPE_RECV_F ? in->chunk - 1 : in->chunk + 1];
                _vs_pipe_cat(who, sizeof who, &len, "%sstage %d waits at %s for stage %d", len ? "; " : "", st,
                             _vs_pipe_itext(in, t), src);
            }
            r = _vs_pipe_vfail(s, first, v.pc[first], "deadlock (a cycle of waits): %s", who);
            goto done;
        }
    }
    for (int k = 0; k < K; k++) // completeness
        for (int m = 0; m < M; m++) {
            unsigned char dn = v.done[k * M + m];
            const char* miss = !(dn & _VS_VF) ? "F" : fwd ? NULL : !(dn & _VS_VB) ? "B (or BW)" : !(dn & _VS_VW) ? "W" : NULL;
            if (!miss && k + 1 < K && s->chunk_stage[k + 1] != s->chunk_stage[k] && !(dn & _VS_VSF)) miss = "SF";
            if (!miss && !fwd && k > 0 && s->chunk_stage[k - 1] != s->chunk_stage[k] && !(dn & _VS_VSB)) miss = "SB";
            if (miss) {
                r = vs_set_error(VS_ERR_INVALID, "schedule: stage %d never runs %s for chunk %d, microbatch %d",
                                 s->chunk_stage[k], miss, k, m);
                goto done;
            }
        }
    for (int pair = 0; pair < P * P; pair++)
        if (v.qhead[pair] != v.qtail[pair]) {
            _vs_pipe_msg* h = &v.q[v.qoff[pair] + v.qhead[pair]];
            r = vs_set_error(VS_ERR_INVALID, "schedule: stage %d sends %s%d.%d but stage %d never receives it",
                             pair / P, h->kind ? "SB" : "SF", h->chunk, h->mb, pair % P);
            goto done;
        }
done:
    vs_free(s->world, v.done);
    vs_free(s->world, v.next_b);
    vs_free(s->world, v.next_w);
    vs_free(s->world, v.synced);
    vs_free(s->world, v.q);
    vs_free(s->world, v.qoff);
    vs_free(s->world, v.qhead);
    vs_free(s->world, v.qtail);
    vs_free(s->world, v.pc);
    vs_free(s->world, v.live);
    return r;
}


// >>pipe-gen -------------------------------------------------------------------

VS_API const char* vs_pipe_kind_name(vs_pipe_kind k)
{
    static const char* const n[VS_PIPE_KIND_COUNT] = {"invalid", "gpipe", "1f1b", "interleaved", "zbh1", "zbv",
                                                      "dualpipev"};
    return (int)k > 0 && (int)k < VS_PIPE_KIND_COUNT ? n[k] : "invalid";
}

VS_API vs_result vs_pipe_kind_parse(const char* name, vs_pipe_kind* out)
{
    if (!name || !out) return vs_set_error(VS_ERR_NULL, "vs_pipe_kind_parse: %s is NULL", name ? "out" : "name");
    for (int k = 1; k < VS_PIPE_KIND_COUNT; k++)
        if (!strcmp(name, vs_pipe_kind_name((vs_pipe_kind)k))) {
            *out = (vs_pipe_kind)k;
            return VS_OK;
        }
    return vs_set_error(VS_ERR_INVALID,
                        "vs_pipe_kind_parse: \"%s\" is not a schedule (gpipe, 1f1b, interleaved, zbh1, zbv, dualpipev)",
                        name);
}

/* Pushes a compute instruction, and SYNC<k> right after chunk k's last backward
   part (backwards run in microbatch order, so that is microbatch M-1's). */
_VS_PIPE_PRIVATE vs_result _vs_pipe_gen_push(vs_pipe_sched* s, int stage, vs_pipe_op op, int k, int m)
{
    vs_result r = vs_pipe_sched_push(s, stage, op, k, m);
    if (r == VS_OK && (op == VS_PIPE_W || op == VS_PIPE_BW) && m == s->mbs - 1)
        r = vs_pipe_sched_push(s, stage, VS_PIPE_SYNC, k, 0);
    return r;
}

/* The greedy list scheduler behind every generator but DualPipeV's steady
   pattern. It plays the pipeline in unit time (F = B = W = 1, a full backward 2,
   no transfer time); whenever a stage is free it takes the first ready
   instruction its kind's rule allows:
   - GPipe: every forward, then the backwards;
   - 1F1B, interleaved: the next backward of the stage's backward order when
     it is ready, else the next forward of its forward order while fewer than
     `limit` activations are held (1F1B: P - p; the interleaved order is
     Megatron's: microbatches in groups of P, chunk after chunk within a group,
     the last group smaller; limit 2(P-p-1) + (V-1)P + 1);
   - ZB-H1: B first, else F under 1F1B's limit (an activation is held until
     its W), else a deferred W: the W fill the bubbles;
   - ZB-V: the same on two chunks per stage (V placement), F of the later
     chunk first, with a limit of 2P chunk activations (1F1B's peak on stage
     0), a few priority variants tried, the best makespan kept.

   Because the lists are an execution the play found, they are free of
   deadlock under any costs (sends never block). When a rule leaves every stage
   stuck (possible only with partial groups), the limits are raised by one:
   the order stays correct, only the memory bound loosens. */
typedef struct _vs_pipe_greedy {
    int P, K, M, kind, split;
    int bprefer_low; // ZB-V: the earlier chunk's B first
    int wfirst;      // ZB-V: a ready W before any forward (else W only fills gaps)
    int hold_to_b;   // the limit counts an activation from F to B (else to W/BW)
    const int* cs;
    int *fdone, *bdone;           // K*M finish times, INT_MAX: not yet
    int *fseq, *bseq;             // interleaved/1F1B: per stage V*M chunk*M+mb, stage p at p*V*M
    int nf[VS_PIPE_MAX_CHUNKS], nb[VS_PIPE_MAX_CHUNKS], nw[VS_PIPE_MAX_CHUNKS];
    int fpos[VS_PIPE_MAX_CHUNKS], bpos[VS_PIPE_MAX_CHUNKS];
    int live[VS_PIPE_MAX_CHUNKS], limit[VS_PIPE_MAX_CHUNKS], free_at[VS_PIPE_MAX_CHUNKS];
    int held[VS_PIPE_MAX_CHUNKS], hlimit[VS_PIPE_MAX_CHUNKS]; // with hold_to_b: F to W, and its bound
    int lc[VS_PIPE_MAX_CHUNKS][2]; // ZB-V: the stage's chunks (earlier, later)
    int V;
} _vs_pipe_greedy;

_VS_PIPE_PRIVATE int _vs_pipe_g_canf(const _vs_pipe_greedy* g, int k, int t)
{
    int m = g->nf[k];
    return m < g->M && (k == 0 || g->fdone[(k - 1) * g->M + m] <= t);
}
_VS_PIPE_PRIVATE int _vs_pipe_g_canb(const _vs_pipe_greedy* g, int k, int t)
{
    int m = g->nb[k];
    return m < g->nf[k] && g->fdone[k * g->M + m] <= t && (k == g->K - 1 || g->bdone[(k + 1) * g->M + m] <= t);
}
_VS_PIPE_PRIVATE int _vs_pipe_g_canw(const _vs_pipe_greedy* g, int k, int t)
{
    return g->nw[k] < g->nb[k] && g->bdone[k * g->M + g->nw[k]] <= t;
}

/* The op stage p takes at time t under the kind's rule: 0 none, else the op with
   its chunk in *k. */
_VS_PIPE_PRIVATE int _vs_pipe_g_pick(const _vs_pipe_greedy* g, int p, int t, int* k)
{
    int VM = g->V * g->M;
    switch (g->kind) {
    case VS_PIPE_GPIPE:
        *k = p;
        if (_vs_pipe_g_canf(g, p, t)) return VS_PIPE_F;
        if (g->nf[p] == g->M && _vs_pipe_g_canb(g, p, t)) return VS_PIPE_BW;
        return 0;
    case VS_PIPE_1F1B:
    case VS_PIPE_INTERLEAVED:
        if (g->bpos[p] < VM) {
            *k = g->bseq[p * VM + g->bpos[p]] / g->M;
            if (_vs_pipe_g_canb(g, *k, t)) return VS_PIPE_BW;
        }
        if (g->fpos[p] < VM && g->live[p] < g->limit[p]) {
            *k = g->fseq[p * VM + g->fpos[p]] / g->M;
            if (_vs_pipe_g_canf(g, *k, t)) return VS_PIPE_F;
        }
        return 0;
    case VS_PIPE_ZBH1:
        *k = p;
        if (_vs_pipe_g_canb(g, p, t)) return VS_PIPE_B;
        if (g->live[p] < g->limit[p] && g->held[p] < g->hlimit[p] && _vs_pipe_g_canf(g, p, t)) return VS_PIPE_F;
        if (_vs_pipe_g_canw(g, p, t)) return VS_PIPE_W;
        return 0;
    default: { // ZB-V (and DualPipeV's fallback)
        int lo = g->lc[p][0], hi = g->lc[p][1];
        int b1 = g->bprefer_low ? lo : hi, b2 = g->bprefer_low ? hi : lo;
        if (_vs_pipe_g_canb(g, b1, t)) return *k = b1, VS_PIPE_B;
        if (_vs_pipe_g_canb(g, b2, t)) return *k = b2, VS_PIPE_B;
        if (g->wfirst) {
            if (_vs_pipe_g_canw(g, lo, t)) return *k = lo, VS_PIPE_W;
            if (_vs_pipe_g_canw(g, hi, t)) return *k = hi, VS_PIPE_W;
        }
        if (g->live[p] < g->limit[p]) {
            if (_vs_pipe_g_canf(g, hi, t)) return *k = hi, VS_PIPE_F;
            if (_vs_pipe_g_canf(g, lo, t)) return *k = lo, VS_PIPE_F;
        }
        /* W of the chunk whose B ran earliest: chunk order per W stays mb order */
        int wl = _vs_pipe_g_canw(g, lo, t), wh = _vs_pipe_g_canw(g, hi, t);
        if (wl && wh) {
            int tl = g->bdone[lo * g->M + g->nw[lo]], th = g->bdone[hi * g->M + g->nw[hi]];
            return *k = tl <= th ? lo : hi, VS_PIPE_W;
        }
        if (wl) return *k = lo, VS_PIPE_W;
        if (wh) return *k = hi, VS_PIPE_W;
        return 0;
    }
    }
}

/* Plays the rule and pushes the compute instructions (and SYNC) into s; the
   unit-time makespan in *span. */
_VS_PIPE_PRIVATE vs_result _vs_pipe_g_run(_vs_pipe_greedy* g, vs_pipe_sched* s, int* span)
{
    int P = g->P, K = g->K, M = g->M;
    int64_t left = (int64_t)K * M * (g->split ? 3 : 2);
    for (int i = 0; i < K * M; i++) g->fdone[i] = g->bdone[i] = INT_MAX;
    for (int k = 0; k < K; k++) g->nf[k] = g->nb[k] = g->nw[k] = 0;
    for (int p = 0; p < P; p++) g->fpos[p] = g->bpos[p] = g->live[p] = g->held[p] = g->free_at[p] = 0;
    int t = 0, end = 0;
    while (left > 0) {
        int took = 0, busy = 0;
        for (int p = 0; p < P; p++) {
            if (g->free_at[p] > t) {
                busy = 1;
                continue;
            }
            int k = 0, op = _vs_pipe_g_pick(g, p, t, &k);
            if (!op) continue;
            int m, cost = op == VS_PIPE_BW ? 2 : 1;
            if (op == VS_PIPE_F) {
                m = g->nf[k]++;
                g->fdone[k * M + m] = t + 1;
                g->live[p]++, g->held[p]++;
                if (g->fseq) g->fpos[p]++;
            } else if (op == VS_PIPE_W) {
                m = g->nw[k]++;
                g->held[p]--;
                if (!g->hold_to_b) g->live[p]--;
            } else {
                m = g->nb[k]++;
                g->bdone[k * M + m] = t + cost;
                if (op == VS_PIPE_BW || g->hold_to_b) g->live[p]--;
                if (g->bseq) g->bpos[p]++;
            }
            vs_result r = _vs_pipe_gen_push(s, p, (vs_pipe_op)op, k, m);
            if (r != VS_OK) return r;
            g->free_at[p] = t + cost;
            if (t + cost > end) end = t + cost;
            took = 1;
            left--;
        }
        if (!took && !busy) { // every stage stuck under its rule: loosen the bound
            for (int p = 0; p < P; p++) { // (INT_MAX: no bound)
                if (g->limit[p] < INT_MAX) g->limit[p]++;
                if (g->hlimit[p] < INT_MAX) g->hlimit[p]++;
            }
            continue;
        }
        t++;
    }
    *span = end;
    return VS_OK;
}

/* DualPipeV's pattern on rank r (chunks c0 = r and c1 = 2P-1-r), for M >= 2P,
   after the DualPipe reference's eight phases:
     1  2(P-r-1) x F0
     2  r+1 x (F0 F1)
     3  P-r-1 x (B1 W1 F1)                  zero bubble: W right after its B
     4  M-2P+r+1 x (F0&B1  F1&B0)          the overlapped pairs, B with its W
     5  P-r-1 x (B1  F1&B0)
     6  r+1 x (B1 B0)                       of these 2(r+1) backwards the first
                                            r+1 take their W at once, the rest
                                            defer it
     7  P-r-1 x (W  B0 deferring its W)
     8  the deferred W, oldest first.
   An overlapped pair is F then B in the list (the engine runs them in turn). */
_VS_PIPE_PRIVATE vs_result _vs_pipe_gen_dualpipev(vs_pipe_sched* s, int r, int* wq)
{
    int P = s->stages, M = s->mbs, c[2] = {r, 2 * P - 1 - r}, f[2] = {0, 0}, b[2] = {0, 0};
    int qh = 0, qt = 0; // deferred W: (chunk side, mb) as side*M+mb
    vs_result e = VS_OK;
#define _VS_DPV_F(x) (e = e ? e : _vs_pipe_gen_push(s, r, VS_PIPE_F, c[x], f[x]++))
#define _VS_DPV_B(x, zb)                                                                  \
    do {                                                                                  \
        if (e) break;                                                                     \
        int m_ = b[x]++;                                                                  \
        e = _vs_pipe_gen_push(s, r, VS_PIPE_B, c[x], m_);                                 \
        if (zb) wq[qt++] = (x) * M + m_;                                                  \
        else if (!e) e = _vs_pipe_gen_push(s, r, VS_PIPE_W, c[x], m_);                    \
    } while (0)
#define _VS_DPV_W()                                                                       \
    do {                                                                                  \
        if (!e && qh < qt) e = _vs_pipe_gen_push(s, r, VS_PIPE_W, c[wq[qh] / M], wq[qh] % M), qh++; \
    } while (0)
    for (int i = 0; i < 2 * (P - r - 1); i++) _VS_DPV_F(0);
    for (int i = 0; i < r + 1; i++) _VS_DPV_F(0), _VS_DPV_F(1);
    for (int i = 0; i < P - r - 1; i++) {
        _VS_DPV_B(1, 1);
        _VS_DPV_W();
        _VS_DPV_F(1);
    }
    for (int i = 0; i < M - 2 * P + r + 1; i++) {
        _VS_DPV_F(0);
        _VS_DPV_B(1, 0);
        _VS_DPV_F(1);
        _VS_DPV_B(0, 0);
    }
    for (int i = 0; i < P - r - 1; i++) {
        _VS_DPV_B(1, 0);
        _VS_DPV_F(1);
        _VS_DPV_B(0, 0);
    }
    for (int j = 0; j < 2 * (r + 1); j++) _VS_DPV_B(j % 2 ? 0 : 1, j >= r + 1);
    for (int i = 0; i < P - r - 1; i++) {
        _VS_DPV_W();
        _VS_DPV_B(0, 1);
    }
    while (!e && qh < qt) _VS_DPV_W();
#undef _VS_DPV_F
#undef _VS_DPV_B
#undef _VS_DPV_W
    return e;
}

/* 1F1B and interleaved as Megatron writes them: stage p runs w forwards of its
   forward order (1F1B: P-p-1; interleaved: 2(P-p-1) + (V-1)P), then one forward
   and one backward in turn, then the remaining backwards. The orders are the
   greedy's fseq/bseq. */
_VS_PIPE_PRIVATE vs_result _vs_pipe_gen_megatron(vs_pipe_sched* s, const _vs_pipe_greedy* g)
{
    int P = g->P, V = g->V, M = g->M, VM = V * M;
    vs_result r = VS_OK;
    for (int p = 0; p < P && r == VS_OK; p++) {
        const int *fs = g->fseq + (size_t)p * VM, *bs = g->bseq + (size_t)p * VM;
        int w = V > 1 ? 2 * (P - p - 1) + (V - 1) * P : P - p - 1, nb = 0;
        if (w > VM) w = VM;
        for (int i = 0; i < w && r == VS_OK; i++) r = _vs_pipe_gen_push(s, p, VS_PIPE_F, fs[i] / M, fs[i] % M);
        for (int i = w; i < VM && r == VS_OK; i++, nb++) {
            r = _vs_pipe_gen_push(s, p, VS_PIPE_F, fs[i] / M, fs[i] % M);
            if (r == VS_OK) r = _vs_pipe_gen_push(s, p, VS_PIPE_BW, bs[nb] / M, bs[nb] % M);
        }
        for (; nb < VM && r == VS_OK; nb++) r = _vs_pipe_gen_push(s, p, VS_PIPE_BW, bs[nb] / M, bs[nb] % M);
    }
    return r;
}

_VS_PIPE_PRIVATE vs_result _vs_pipe_sim_run(const vs_pipe_sched* s, const vs_pipe_costs* costs, vs_pipe_sim* out,
                                            double* t0, double* t1);

VS_API vs_result vs_pipe_generate(const vs_world* world, vs_pipe_kind kind, int stages, int chunks, int mbs,
                                  vs_pipe_sched** out)
{
    if (!out) return vs_set_error(VS_ERR_NULL, "vs_pipe_generate: out is NULL");
    *out = NULL;
    if ((int)kind <= 0 || (int)kind >= VS_PIPE_KIND_COUNT)
        return kind == VS_PIPE_DEFAULT
                   ? vs_set_error(VS_ERR_INVALID, "vs_pipe_generate: kind 0 (VS_PIPE_DEFAULT) names no schedule (gpipe, 1f1b, "
                                                  "interleaved, zbh1, zbv or dualpipev)")
                   : vs_set_error(VS_ERR_INVALID, "vs_pipe_generate: kind %d is not a vs_pipe_kind", (int)kind);
    const char* kn = vs_pipe_kind_name(kind);
    if (stages < 1 || stages > VS_PIPE_MAX_CHUNKS)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_generate: %s: stages = %d (1..%d)", kn, stages,
                            VS_PIPE_MAX_CHUNKS);
    if (mbs < 1 || mbs > VS_PIPE_MAX_MBS)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_generate: %s: microbatch count %d (1..%d, VS_PIPE_MAX_MBS)", kn, mbs,
                            VS_PIPE_MAX_MBS);
    int vshape = kind == VS_PIPE_ZBV || kind == VS_PIPE_DUALPIPEV, V;
    _VS_TRY(_vs_pipe_kind_chunks("vs_pipe_generate", kind, chunks, &V));
    if (V < 1 || (int64_t)V * stages > VS_PIPE_MAX_CHUNKS)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_generate: %s: chunks = %d per stage (1..%d with %d stages)", kn,
                            chunks, VS_PIPE_MAX_CHUNKS / stages, stages);
    int P = stages, K = P * V, M = mbs;
    if ((int64_t)K * M > (1 << 24))
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_generate: %s: %d chunks x %d microbatches is too many (at most %d)",
                            kn, K, M, 1 << 24);
    int cs[VS_PIPE_MAX_CHUNKS];
    for (int k = 0; k < K; k++) cs[k] = vshape ? (k < P ? k : 2 * P - 1 - k) : k % P;

    _vs_pipe_greedy* g = _VS_PIPE_NEW(world, _vs_pipe_greedy, 1);
    int* buf = _VS_PIPE_NEW(world, int, (size_t)K * M * 4);
    vs_pipe_sched *s = NULL, *best = NULL;
    vs_result r = VS_OK;
    if (!g || !buf) {
        r = vs_set_error(VS_ERR_NOMEM, "vs_pipe_generate: out of memory");
        goto done;
    }
    g->P = P, g->K = K, g->M = M, g->V = V, g->kind = (int)kind, g->cs = cs;
    g->split = kind == VS_PIPE_ZBH1 || vshape;
    g->fdone = buf, g->bdone = buf + (size_t)K * M;
    if (kind == VS_PIPE_1F1B || kind == VS_PIPE_INTERLEAVED) {
        g->fseq = buf + (size_t)2 * K * M, g->bseq = buf + (size_t)3 * K * M;
        for (int p = 0; p < P; p++) {
            int n = 0;
            for (int m0 = 0; m0 < M; m0 += P) {
                int gs = M - m0 < P ? M - m0 : P;
                for (int v = 0; v < V; v++)
                    for (int j = 0; j < gs; j++, n++) {
                        g->fseq[p * V * M + n] = (v * P + p) * M + m0 + j;
                        g->bseq[p * V * M + n] = ((V - 1 - v) * P + p) * M + m0 + j;
                    }
            }
        }
    }
    if (kind == VS_PIPE_1F1B || kind == VS_PIPE_INTERLEAVED) {
        /* Megatron's lists; where a partial last group makes them deadlock
           (the play says so), the greedy rule below takes over. */
        vs_pipe_sim* sim = _VS_PIPE_NEW(world, vs_pipe_sim, 1);
        r = sim ? vs_pipe_sched_new(world, P, K, cs, M, &best) : vs_set_error(VS_ERR_NOMEM, "vs_pipe_generate: out of memory");
        if (r == VS_OK) r = _vs_pipe_gen_megatron(best, g);
        if (r == VS_OK && _vs_pipe_sim_run(best, NULL, sim, NULL, NULL) != VS_OK) {
            vs_clear_error();
            _vs_pipe_sched_release(best, 0);
            best = NULL;
        }
        vs_free(world, sim);
    }
    if (r != VS_OK || best) {
    } else if (kind == VS_PIPE_DUALPIPEV && M >= 2 * P) {
        r = vs_pipe_sched_new(world, P, K, cs, M, &best);
        for (int p = 0; p < P && r == VS_OK; p++) r = _vs_pipe_gen_dualpipev(best, p, buf);
    } else {
        /* ZB-V tries its variants (DualPipeV with M < 2P falls back to ZB-V's
           rule); the others have one. */
        int best_span = INT_MAX, nvar = vshape ? 8 : 1;
        for (int v = 0; v < nvar && r == VS_OK; v++) {
            g->bprefer_low = v & 1, g->wfirst = (v >> 1) & 1;
            g->hold_to_b = kind == VS_PIPE_ZBH1;
            for (int p = 0; p < P; p++) {
                g->lc[p][0] = p, g->lc[p][1] = 2 * P - 1 - p;
                g->hlimit[p] = kind == VS_PIPE_ZBH1 ? 2 * P - 1 - p : INT_MAX;
                g->limit[p] = vshape                               ? 2 * P - (v >> 2)
                              : kind == VS_PIPE_GPIPE              ? M
                              : kind == VS_PIPE_INTERLEAVED && V > 1 ? 2 * (P - p - 1) + (V - 1) * P + 1
                                                                   : P - p;
            }
            int span = 0;
            r = vs_pipe_sched_new(world, P, K, cs, M, &s);
            if (r == VS_OK) r = _vs_pipe_g_run(g, s, &span);
            if (r == VS_OK && span < best_span) {
                if (best) _vs_pipe_sched_release(best, 0);
                best = s, best_span = span, s = NULL;
            }
            if (s) _vs_pipe_sched_release(s, 0);
            s = NULL;
        }
    }
done:
    for (int p = 0; best && r == VS_OK && p < P; p++) r = vs_pipe_sched_push(best, p, VS_PIPE_STEP, 0, 0);
    if (r == VS_OK) r = vs_pipe_sched_add_comm(best);
    vs_free(world, buf);
    vs_free(world, g);
    if (r != VS_OK) {
        if (best) _vs_pipe_sched_release(best, 0);
        return r;
    }
    *out = best;
    return VS_OK;
}

// >>pipe-sim -------------------------------------------------------------------

/* Per-chunk costs with the defaults resolved; negative or non-finite is bad. */
_VS_PIPE_PRIVATE vs_result _vs_pipe_costs_get(const vs_pipe_costs* c, int K, double* f, double* b, double* w,
                                              double* p2p)
{
    vs_pipe_costs d = {0, 0, 0, 0, NULL, NULL, NULL};
    if (!c) c = &d;
    double sf = c->f, sb = c->b, sw = c->w;
    if (sf == 0 && sb == 0 && sw == 0) sf = sb = sw = 1;
    *p2p = c->p2p;
    if (!(c->p2p >= 0 && c->p2p < HUGE_VAL))
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_costs: p2p = %g (a finite time >= 0)", c->p2p);
    for (int k = 0; k < K; k++) {
        f[k] = c->chunk_f ? c->chunk_f[k] : sf;
        b[k] = c->chunk_b ? c->chunk_b[k] : sb;
        w[k] = c->chunk_w ? c->chunk_w[k] : sw;
        const double v[3] = {f[k], b[k], w[k]};
        for (int i = 0; i < 3; i++)
            if (!(v[i] >= 0 && v[i] < HUGE_VAL))
                return vs_set_error(VS_ERR_INVALID, "vs_pipe_costs: %s of chunk %d = %g (a finite time >= 0)",
                                    i == 0 ? "f" : i == 1 ? "b" : "w", k, v[i]);
    }
    return VS_OK;
}

/* Plays the lists against the costs. t0/t1 (may be NULL): start and end of
   instruction i of stage p at off[p] + i, off[p] = sum of the earlier lengths. */
_VS_PIPE_PRIVATE vs_result _vs_pipe_sim_run(const vs_pipe_sched* s, const vs_pipe_costs* costs, vs_pipe_sim* out,
                                            double* t0, double* t1)
{
    int P = s->stages, K = s->nchunks, M = s->mbs;
    size_t KM = (size_t)K * M;
    double* mem = _VS_PIPE_NEW(s->world, double, 4 * KM + 3 * (size_t)K);
    if (!mem) return vs_set_error(VS_ERR_NOMEM, "vs_pipe_simulate: out of memory");
    double *fend = mem, *bend = mem + KM, *sendf = mem + 2 * KM, *sendb = mem + 3 * KM;
    double *cf = mem + 4 * KM, *cb = cf + K, *cw = cb + K, p2p = 0;
    int pos[VS_PIPE_MAX_CHUNKS] = {0}, off[VS_PIPE_MAX_CHUNKS];
    double free_at[VS_PIPE_MAX_CHUNKS] = {0}, total = 0;
    vs_result r = _vs_pipe_costs_get(costs, K, cf, cb, cw, &p2p);
    if (r != VS_OK) goto done;
    { // every time the play adds up stays below this: each instruction's cost and one p2p hop
        double bound = 0, big = p2p;
        size_t n = 0;
        for (int p = 0; p < P; p++)
            for (int i = 0; i < s->len[p]; i++, n++) {
                const vs_pipe_instr* in = &s->ins[p][i];
                int k = in->chunk, op = in->op;
                double c1 = op == VS_PIPE_F ? cf[k] : op == VS_PIPE_B || op == VS_PIPE_BW ? cb[k] : op == VS_PIPE_W ? cw[k] : 0;
                double c2 = op == VS_PIPE_BW ? cw[k] : 0;
                if (c1 > big) big = c1;
                if (c2 > big) big = c2;
                bound += c1 + c2 + p2p;
            }
        if (!(bound < HUGE_VAL)) {
            r = vs_set_error(VS_ERR_INVALID,
                             "vs_pipe_costs: the costs (the largest %g, p2p %g) add up past the largest double over the "
                             "schedule's %zu instructions",
                             big, p2p, n);
            goto done;
        }
    }
    for (size_t i = 0; i < 4 * KM; i++) mem[i] = -1; // -1: has not run yet
    memset(out, 0, sizeof *out);
    for (int p = 0, o = 0; p < P; o += s->len[p], p++) off[p] = o;
    for (int progress = 1; progress;) {
        progress = 0;
        for (int p = 0; p < P; p++) {
            while (pos[p] < s->len[p]) {
                const vs_pipe_instr* in = &s->ins[p][pos[p]];
                int k = in->chunk, m = in->mb, op = in->op;
                double ready = free_at[p], cost = 0, dep = 0;
                int wait = 0; // an input that has not come yet
#define _VS_SIM_NEED(t, hop)                                                     \
    do {                                                                         \
        double t_ = (t);                                                         \
        if (t_ < 0) wait = 1;                                                    \
        else if (t_ + (hop) > dep) dep = t_ + (hop);                             \
    } while (0)
                switch (op) {
                case VS_PIPE_F:
                    cost = cf[k];
                    if (k > 0) _VS_SIM_NEED(fend[(size_t)(k - 1) * M + m], s->chunk_stage[k - 1] != p ? p2p : 0);
                    break;
                case VS_PIPE_B:
                case VS_PIPE_BW:
                    cost = op == VS_PIPE_B ? cb[k] : cb[k] + cw[k];
                    _VS_SIM_NEED(fend[(size_t)k * M + m], 0);
                    if (k < K - 1) _VS_SIM_NEED(bend[(size_t)(k + 1) * M + m], s->chunk_stage[k + 1] != p ? p2p : 0);
                    break;
                case VS_PIPE_W:
                    cost = cw[k];
                    _VS_SIM_NEED(bend[(size_t)k * M + m], 0);
                    break;
                case VS_PIPE_SEND_F: _VS_SIM_NEED(fend[(size_t)k * M + m], 0); break;
                case VS_PIPE_SEND_B: _VS_SIM_NEED(bend[(size_t)k * M + m], 0); break;
                case VS_PIPE_RECV_F:
                case VS_PIPE_RECV_B:
                    if ((op == VS_PIPE_RECV_F && k == 0) || (op == VS_PIPE_RECV_B && k == K - 1)) {
                        r = vs_set_error(VS_ERR_INVALID, "vs_pipe_simulate: stage %d position %d: %s%d.%d has no sender",
                                         p, pos[p], _vs_pipe_op_text(op), k, m);
                        goto done;
                    }
                    if (op == VS_PIPE_RECV_F) _VS_SIM_NEED(sendf[(size_t)(k - 1) * M + m], p2p);
                    else _VS_SIM_NEED(sendb[(size_t)(k + 1) * M + m], p2p);
                    break;
                default: break; // SYNC, STEP: hooks, no time
                }
#undef _VS_SIM_NEED
                if (wait) break;
                double start = dep > ready ? dep : ready, end = start + cost;
                if (op == VS_PIPE_F) fend[(size_t)k * M + m] = end;
                if (op == VS_PIPE_B || op == VS_PIPE_BW) bend[(size_t)k * M + m] = end;
                if (op == VS_PIPE_SEND_F) sendf[(size_t)k * M + m] = start;
                if (op == VS_PIPE_SEND_B) sendb[(size_t)k * M + m] = start;
                if (t0) t0[off[p] + pos[p]] = start, t1[off[p] + pos[p]] = end;
                out->busy[p] += cost;
                if (end > out->makespan) out->makespan = end;
                free_at[p] = end;
                pos[p]++;
                progress = 1;
            }
        }
    }
    {
        char msg[512];
        size_t len = 0;
        int stuck = 0;
        for (int p = 0; p < P; p++) {
            if (pos[p] == s->len[p]) continue;
            const vs_pipe_instr* in = &s->ins[p][pos[p]];
            if (stuck++ < 8)
                _vs_pipe_cat(msg, sizeof msg, &len, "%s stage %d at %d (%s%d.%d)", stuck > 1 ? "," : "", p, pos[p],
                             _vs_pipe_op_text(in->op), in->chunk, in->mb);
        }
        if (stuck) {
            r = vs_set_error(VS_ERR_INVALID, "vs_pipe_simulate: deadlock, %d stage%s cannot go on:%s%s", stuck,
                             stuck > 1 ? "s" : "", msg, stuck > 8 ? ", ..." : "");
            goto done;
        }
    }
    for (int p = 0; p < P; p++) {
        total += out->busy[p];
        int live = 0;
        for (int i = 0; i < s->len[p]; i++) {
            int op = s->ins[p][i].op;
            if (op == VS_PIPE_F && ++live > out->peak_live[p]) out->peak_live[p] = live;
            if (op == VS_PIPE_W || op == VS_PIPE_BW) live--;
        }
    }
    out->ideal = total / P;
    out->bubble = out->makespan > 0 ? 1 - total / (P * out->makespan) : 0;
done:
    vs_free(s->world, mem);
    return r;
}

VS_API vs_result vs_pipe_simulate(const vs_pipe_sched* s, const vs_pipe_costs* costs, vs_pipe_sim* out)
{
    _VS_TRY(_VS_SCHED_GONE("vs_pipe_simulate", s));
    if (!s || !out) return vs_set_error(VS_ERR_NULL, "vs_pipe_simulate: %s is NULL", s ? "out" : "schedule");
    return _vs_pipe_sim_run(s, costs, out, NULL, NULL);
}

/* The simulated start and end of every instruction, in one block (t1 = t0 + n). */
_VS_PIPE_PRIVATE vs_result _vs_pipe_sim_times(const vs_pipe_sched* s, const vs_pipe_costs* costs, vs_pipe_sim* sim,
                                              double** t0)
{
    size_t n = 0;
    for (int p = 0; p < s->stages; p++) n += (size_t)s->len[p];
    *t0 = _VS_PIPE_NEW(s->world, double, 2 * n);
    if (!*t0) return vs_set_error(VS_ERR_NOMEM, "vs_pipe_simulate: out of memory");
    vs_result r = _vs_pipe_sim_run(s, costs, sim, *t0, *t0 + n);
    if (r != VS_OK) vs_free(s->world, *t0), *t0 = NULL;
    return r;
}

_VS_PIPE_PRIVATE int _vs_pipe_compute_op(int op)
{
    return op == VS_PIPE_F || op == VS_PIPE_B || op == VS_PIPE_W || op == VS_PIPE_BW;
}

VS_API int vs_pipe_draw(const vs_pipe_sched* s, const vs_pipe_costs* costs, double slot, char* buf, size_t cap)
{
    if (buf && cap) buf[0] = 0;
    if (!s) return vs_set_error(VS_ERR_NULL, "vs_pipe_draw: schedule is NULL"), -1;
    if (_VS_SCHED_GONE("vs_pipe_draw", s) || _vs_pipe_bad_buf("vs_pipe_draw", buf, cap)) return -1;
    if (!(slot >= 0 && slot < HUGE_VAL)) return vs_set_error(VS_ERR_INVALID, "vs_pipe_draw: slot = %g", slot), -1;
    vs_pipe_sim sim;
    double* t0 = NULL;
    if (_vs_pipe_sim_times(s, costs, &sim, &t0) != VS_OK) return -1;
    size_t n = 0;
    for (int p = 0; p < s->stages; p++) n += (size_t)s->len[p];
    double* t1 = t0 + n;
    int one = s->nchunks == s->stages, cw = 1; // one chunk per stage: labels without the chunk
    if (slot == 0) {
        slot = HUGE_VAL;
        for (size_t i = 0; i < n; i++)
            if (t1[i] - t0[i] > 0 && t1[i] - t0[i] < slot) slot = t1[i] - t0[i];
        if (slot == HUGE_VAL) slot = 1;
    }
    char lab[48];
    for (int p = 0; p < s->stages; p++)
        for (int i = 0; i < s->len[p]; i++) {
            const vs_pipe_instr* in = &s->ins[p][i];
            if (!_vs_pipe_compute_op(in->op)) continue;
            int l = one ? snprintf(lab, sizeof lab, "%s%d", _vs_pipe_op_text(in->op), in->mb)
                        : snprintf(lab, sizeof lab, "%s%d.%d", _vs_pipe_op_text(in->op), in->chunk, in->mb);
            if (l > cw) cw = l;
        }
    const int max_cols = 4096;
    double fc = ceil(sim.makespan / slot - 1e-9);
    int cols = fc > max_cols ? max_cols : (int)fc;
    size_t len = 0;
    /* chunks per stage, as a plan counts them ("chunks: 1"): the total beside a
       stage count read as chunks per stage */
    if (s->nchunks % s->stages == 0)
        _vs_pipe_cat(buf, cap, &len, "# %d stage%s, %d chunk%s per stage", s->stages, s->stages == 1 ? "" : "s",
                     s->nchunks / s->stages, s->nchunks / s->stages == 1 ? "" : "s");
    else
        _vs_pipe_cat(buf, cap, &len, "# %d stage%s, %d chunks in all", s->stages, s->stages == 1 ? "" : "s", s->nchunks);
    _vs_pipe_cat(buf, cap, &len,
                 ", %d microbatch%s; one column = %g time units; makespan %g, bubble %.1f%%\n"
                 "# F forward, B backward for the input, W backward for the weights, BW full backward;\n"
                 "# %s; '-' goes on, '.' idle\n",
                 s->mbs, s->mbs == 1 ? "" : "es", slot, sim.makespan, 100 * sim.bubble,
                 one ? "F3 = microbatch 3" : "F2.3 = chunk 2, microbatch 3");
    char* row = _VS_PIPE_NEW(s->world, char, (size_t)cols * (size_t)(cw + 1) + 1);
    if (!row) {
        vs_free(s->world, t0);
        return vs_set_error(VS_ERR_NOMEM, "vs_pipe_draw: out of memory"), -1;
    }
    for (int p = 0, o = 0; p < s->stages; o += s->len[p], p++) {
        for (int c = 0; c < cols; c++) {
            memset(row + (size_t)c * (cw + 1), ' ', (size_t)cw + 1);
            row[(size_t)c * (cw + 1)] = '.';
        }
        for (int i = 0; i < s->len[p]; i++) {
            const vs_pipe_instr* in = &s->ins[p][i];
            if (!_vs_pipe_compute_op(in->op) || t1[o + i] <= t0[o + i]) continue;
            // columns in double first: a tiny slot puts them far past any int (cut at cols)
            double fa = floor(t0[o + i] / slot + 1e-9), fb = ceil(t1[o + i] / slot - 1e-9);
            if (!(fa < cols)) continue;
            int a = (int)fa, b = fb < cols ? (int)fb : cols;
            if (b <= a) b = a + 1;
            int l = one ? snprintf(lab, sizeof lab, "%s%d", _vs_pipe_op_text(in->op), in->mb)
                        : snprintf(lab, sizeof lab, "%s%d.%d", _vs_pipe_op_text(in->op), in->chunk, in->mb);
            for (int c = a; c < b && c < cols; c++) {
                char* cell = row + (size_t)c * (cw + 1);
                memset(cell, ' ', (size_t)cw + 1);
                if (c == a) memcpy(cell, lab, (size_t)l);
                else cell[0] = '-';
            }
        }
        size_t rl = (size_t)cols * (cw + 1);
        while (rl > 0 && row[rl - 1] == ' ') rl--;
        row[rl] = 0;
        _vs_pipe_cat(buf, cap, &len, "%2d | %s\n", p, row);
    }
    if (cols < fc) _vs_pipe_cat(buf, cap, &len, "# (cut at %d columns)\n", cols);
    vs_free(s->world, row);
    vs_free(s->world, t0);
    return (int)len;
}

VS_API vs_result vs_pipe_trace_write(const vs_pipe_sched* s, const double* const* t0, const double* const* t1,
                                     const char* path)
{
    _VS_TRY(_VS_SCHED_GONE("vs_pipe_trace_write", s));
    if (!s || !t0 || !t1 || !path)
        return vs_set_error(VS_ERR_NULL, "vs_pipe_trace_write: %s is NULL",
                            !s ? "schedule" : !t0 ? "t0" : !t1 ? "t1" : "path");
    for (int p = 0; p < s->stages; p++) {
        if (s->len[p] && (!t0[p] || !t1[p]))
            return vs_set_error(VS_ERR_NULL, "vs_pipe_trace_write: %s[%d] is NULL", t0[p] ? "t1" : "t0", p);
        for (int i = 0; i < s->len[p]; i++)
            if (!(t0[p][i] >= 0 && t1[p][i] >= t0[p][i] && t1[p][i] < HUGE_VAL))
                return vs_set_error(VS_ERR_INVALID, "vs_pipe_trace_write: stage %d instruction %d: start %g, end %g", p,
                                    i, t0[p][i], t1[p][i]);
    }
    FILE* fp = fopen(path, "w");
    if (!fp) return vs_set_error(VS_ERR_IO, "vs_pipe_trace_write: cannot open \"%s\" for writing", path);
    fprintf(fp, "{\"traceEvents\":[\n");
    for (int p = 0; p < s->stages; p++)
        fprintf(fp, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,\"args\":{\"name\":\"stage %d\"}},\n", p,
                p);
    int first = 1;
    for (int p = 0; p < s->stages; p++)
        for (int i = 0; i < s->len[p]; i++) {
            const vs_pipe_instr* in = &s->ins[p][i];
            char name[48];
            if (in->op == VS_PIPE_STEP) snprintf(name, sizeof name, "STEP");
            else if (in->op == VS_PIPE_SYNC) snprintf(name, sizeof name, "SYNC%d", in->chunk);
            else snprintf(name, sizeof name, "%s%d.%d", _vs_pipe_op_text(in->op), in->chunk, in->mb);
            fprintf(fp, "%s{\"name\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":0,\"tid\":%d}", first ? "" : ",\n",
                    name, t0[p][i] * 1e6, (t1[p][i] - t0[p][i]) * 1e6, p);
            first = 0;
        }
    fprintf(fp, "\n],\"displayTimeUnit\":\"ms\"}\n");
    if (ferror(fp) | fclose(fp)) return vs_set_error(VS_ERR_IO, "vs_pipe_trace_write: writing \"%s\" failed", path);
    return VS_OK;
}

VS_API vs_result vs_pipe_trace_simulated(const vs_pipe_sched* s, const vs_pipe_costs* costs, const char* path)
{
    _VS_TRY(_VS_SCHED_GONE("vs_pipe_trace_simulated", s));
    if (!s || !path) return vs_set_error(VS_ERR_NULL, "vs_pipe_trace_simulated: %s is NULL", s ? "path" : "schedule");
    vs_pipe_sim sim;
    double* t0 = NULL;
    vs_result r = _vs_pipe_sim_times(s, costs, &sim, &t0);
    if (r != VS_OK) return r;
    size_t n = 0;
    const double* a[VS_PIPE_MAX_CHUNKS];
    const double* b[VS_PIPE_MAX_CHUNKS];
    for (int p = 0; p < s->stages; p++) n += (size_t)s->len[p];
    for (int p = 0, o = 0; p < s->stages; o += s->len[p], p++) a[p] = t0 + o, b[p] = t0 + n + o;
    r = vs_pipe_trace_write(s, a, b, path);
    vs_free(s->world, t0);
    return r;
}

// >>pipe-engine ----------------------------------------------------------------

/* A tensor's declared spec ("h:f32[*,64]"): dtype and dims, each optional. */
typedef struct _vs_pipe_spec {
    vs_dtype dt; // INVALID: any
    int ndim;    // -1: any
    int64_t dim[VS_PIPE_MAX_DIMS]; // -1: any
} _vs_pipe_spec;

typedef struct _vs_pipe_tinfo {
    char name[VS_PIPE_NAME_MAX];
    int producer;       // unit, or -1 for a data input
    int out_index;      // its index among the producer's outputs
    _vs_pipe_spec spec; // the producer's
    int refs_here;      // chunks on this stage that hold it (per microbatch)
    int last_out;       // an output of the last unit: kept after the run (vs_pipe_mb_output)
} _vs_pipe_tinfo;

typedef struct _vs_pipe_uinfo {
    int nin, nout, chunk;
    int in[VS_PIPE_MAX_IO], out[VS_PIPE_MAX_IO]; // tensor ids
    _vs_pipe_spec in_spec[VS_PIPE_MAX_IO], out_spec[VS_PIPE_MAX_IO];
} _vs_pipe_uinfo;

/* One tensor of one microbatch on this stage. */
typedef struct _vs_pipe_slot {
    vs_dtype dt;
    int ndim;
    int64_t shape[VS_PIPE_MAX_DIMS];
    size_t bytes;
    void* data;
    void* grad;
    int released; // chunks that let go of it
} _vs_pipe_slot;

/* A message's header: magic, grad, chunk, mb, tensor count, bytes, then per tensor
   its id, dtype, ndim and dims. */
#define _VS_PIPE_MAGIC 0x7673707069706531ll
#define _VS_PIPE_HDR(nt) (6 + (size_t)(nt) * (3 + VS_PIPE_MAX_DIMS))

typedef struct _vs_pipe_link { // the 2-rank communicator that carries src -> dst
    int src, dst;
    vs_comm* c;
    /* Host path, this stage the destination: the next message's header is
       received ahead (posted when the previous message is taken), and its bytes
       are posted as soon as the header is in (_vs_pipe_progress), so the copy
       runs while this stage computes. */
    int64_t* pre_hdr;   // the header being received (sized for the largest boundary)
    vs_work* pre_hw;    // its receive, or NULL
    int pre_hdone;      // the header is in
    vs_result pre_err;  // its receive failed (found by _vs_pipe_progress): the next receive reports it
    char* pre_buf;      // the bytes being received, or NULL
    vs_work* pre_bw;
    size_t pre_hn;      // the posted header's length (int64 words)
    int64_t* hhdr;      // device path, this stage the destination: the header lands here (pinned host memory)
    void* stream;       // device path: the stream its sends or receives run on (its own)
    int ordered;        // device path: an NCCL link, its work in stream order (else forced over threads: host order)
    /* Device path, this run: the peer's instruction (its position in its list)
       of each message of this link in order, its receives (this stage the
       source) or its sends (the destination) (_vs_pipe_peer_order); `at`
       counts this stage's send or receive instructions on the link so far. */
    int* peer_pos;
    int npeer, peer_cap, at;
} _vs_pipe_link;

typedef struct _vs_pipe_inflight { // a message in flight
    vs_work* w[2];
    void* buf;      // engine memory (device on the device path)
    int64_t* hdr;   // device path: the header's host copy, read by the copy to buf
    int link;       // device path: its link (p->links)
    int peer_pos;   // device path: the receiver's instruction that takes it
} _vs_pipe_inflight;

struct _vs_pipe_rt { // what vs_pipe_output and vs_pipe_save need
    vs_pipe* p;
    int mb, unit;
    const int* out_ids;
    const _vs_pipe_spec* out_spec;
    int again; // a recompute's forward: the outputs exist (vs_pipe_unit.recompute)
};

struct vs_pipe {
    uint32_t magic;    // _VS_PIPE_LIVE
    const char* owner; // set: another handle's (a training state's), which frees it; vs_pipe_free refuses
    vs_mesh* mesh;
    vs_world* w;
    vs_comm* pp; // NULL for one stage
    int stage, P;
    vs_pipe_desc desc;
    vs_pipe_plan plan;
    _vs_pipe_uinfo* u;
    _vs_pipe_tinfo* t;
    int ntensors, loss_id;
    int* bset; // boundary k (the inputs of chunk k that come from earlier chunks): bset[boff[k]..boff[k+1])
    int* boff;
    int* hset; // what chunk k holds on this stage: hset[hoff[k]..hoff[k+1])
    int* hoff;
    _vs_pipe_link* links;
    int nlinks;
    int maxnt;                 // the most tensors a boundary carries
    void* cache;               // host blocks freed, for the next request of their size (_vs_pipe_buf)
    size_t cache_bytes;
    size_t live_bytes, peak_bytes; // host blocks in use now, and the most this run
    size_t last_peak;              // peak_bytes of the last run (vs_pipe_last_memory)
    const vs_pipe_sched* cur_s; // the run in progress: its schedule and position
    int cur_pos;
    // the current or last run
    int M;
    int fwd;                // a forward-only schedule (vs_pipe_sched_forward)
    _vs_pipe_slot* slots;   // [mb * ntensors + t]
    void** saved;           // [unit * M + mb]
    size_t* saved_bytes;
    float* mb_loss;
    int* pending;           // [chunk * M + mb]: parts left before its memory goes
    void* dcache;           // device path: free blocks (_vs_pipe_dblk), reused by size
    void* dlive;            // device path: blocks handed out
    long nruns;             // runs done (which run last used a device block)
    double* t0;
    double* t1;
    int tcap, tn;
    double* all_t;          // vs_pipe_gather_timelines: [stage][1 + 2 * max n] (n, t0..., t1...)
    const double** all_t0;  // [stage] into all_t
    const double** all_t1;
    int* all_n;
    double hook_wall, hook_cpu; // in the SYNC and STEP hooks (vs_pipe_last_hooks)
    int64_t hook_seq;           // the run's on_unit calls so far (vs_pipe_hook_event.seq)
    _vs_pipe_inflight* sends;
    int nsends, scap;
    const vs_pipe_sched* checked;
    uint64_t checked_ver;
    int ran;
    // buffers in device memory (the NCCL transport), and the streams
    int dev;
    void* stream;      // compute (cudaStream_t): units, copies, zeroing, receives
    void* send_stream; // device path, links without a stream (forced over threads): sends
    void* send_ev;     // device path: the compute stream so far -> a link's stream (a send, a receive)
    float seed;        // the loss gradient's seed, the source of its copy
    double loss_scale; // vs_pipe_set_loss_scale (1: none)
    float* dseed;      // device path: the seed in device memory, copied again only when it changes
    float dseed_val;
    int dseed_set;
    void* pinned;      // device path: cudaMallocHost'ed: each incoming link's header
    void* recv_stream; // device path, links without a stream (forced over threads): receives
    int dasync;        // device path: blocks from cudaMallocAsync on the compute stream (no device hooks)
    float* dlosses;    // device path: this run's microbatch losses, device memory
    int fixed;         // desc.fixed_shapes
    int64_t* fhist;    // fixed shapes: [mb][boundary] the header of each activation message of the runs so far
    int fhist_m;       // microbatches it holds
    float* hloss;      // device path with stages: the microbatch losses' broadcast lands here (pinned host memory)
    int loss_pending;  // desc.defer_loss: the last run's losses are on the device only (dlosses)
    double last_loss;  // the last run's minibatch loss (vs_pipe_loss)
    int hloss_cap;
};

/* Engine memory: host buffers, or on the device path device memory with its
   work on the compute stream. The host path is these helpers' last lines. */
#ifdef _VS_PIPE_CUDA
_VS_PIPE_PRIVATE vs_result _vs_pipe_cuerr(cudaError_t e, const char* what)
{
    return vs_cuda_error((int)e, "vs_pipe", what); // (vescale_mesh.h's: the message and CUDA's code)
}
#endif

/* `bytes` of engine memory, zeroed when zero (always on the host path). */
/* Host blocks carry their size and, once freed, sit in the pipe's cache for
   the next request of the same size: a run's activations, gradients and
   messages have the same sizes step after step, so steady state allocates
   nothing (fresh blocks of these sizes come from mmap and fault in every
   step: 4% of a step in bench/train). The cache holds at most what one run had
   live at once, and vs_pipe_free releases it. */
typedef struct _vs_pipe_blk {
    size_t bytes;
    struct _vs_pipe_blk* next;
} _vs_pipe_blk;
#define _VS_PIPE_BLK 16 // header bytes before the block (keeps 16-byte alignment)

/* Device blocks are cached too, on the host side (their memory cannot hold a
   header): no cudaMalloc or cudaFree in a steady-state run (cudaFree waits for
   the whole device, NCCL kernels waiting on peers included). Sizes are rounded
   up to a power of two (to 2 MiB steps past 64 MiB), and a request takes the
   smallest free block of at least its size and at most twice its class, so shapes that
   vary a little from step to step (sequence lengths) still reuse. A block goes
   back when its last use is queued on the compute stream, or done (a send is
   waited first), so its next user, on the same stream, comes after; one no run
   has used for _VS_PIPE_DKEEP runs is freed after a run. */
typedef struct _vs_pipe_dblk {
    void* ptr;
    size_t bytes; // its size
    size_t req;   // the size asked for (the engine's accounting)
    long used;    // the run that last handed it out
    /* the compute stream where it was last given back (a cudaEvent_t, made at
       its first give-back; ev_ok: recorded): a receive into it waits for that,
       not for all the compute queued since (the transfer then overlaps it) */
    void* ev;
    int ev_ok;
    int msg; // last handed out for a receive's bytes (_VS_PIPE_BUF_RECV)
    struct _vs_pipe_dblk* next;
} _vs_pipe_dblk;
#define _VS_PIPE_DKEEP 16

_VS_PIPE_PRIVATE size_t _vs_pipe_dclass(size_t n)
{
    if (n > ((size_t)64 << 20)) {
        size_t step = (size_t)2 << 20;
        return n > SIZE_MAX - step ? n : (n + step - 1) / step * step;
    }
    size_t c = 256;
    while (c < n) c <<= 1;
    return c;
}

_VS_PIPE_PRIVATE void _vs_pipe_buf_free(const vs_pipe* p, void* ptr);

/* A device block for the cache, and back. Without device hooks: stream-ordered
   (cudaMallocAsync / cudaFreeAsync on the compute stream), so neither waits for
   the device, whose send and receive streams may hold NCCL operations waiting
   for peers (cudaMalloc and cudaFree synchronise the device: a cache miss in a
   run, two ranks each waiting for its send to the other, deadlocks). With the
   world's hooks: the hooks (the trainer's allocator decides). */
_VS_PIPE_PRIVATE void* _vs_pipe_dalloc(const vs_pipe* p, size_t bytes)
{
#ifdef _VS_PIPE_CUDA
    void* ptr = NULL;
    if (p->dasync) return cudaMallocAsync(&ptr, bytes, (cudaStream_t)p->stream) == cudaSuccess ? ptr : NULL;
#endif
    return vs_device_alloc(p->w, bytes);
}

_VS_PIPE_PRIVATE void _vs_pipe_dfree(const vs_pipe* p, void* ptr)
{
#ifdef _VS_PIPE_CUDA
    if (p->dasync) {
        cudaFreeAsync(ptr, (cudaStream_t)p->stream);
        return;
    }
#endif
    vs_device_free(p->w, ptr);
}

/* A device block's memory and its event, and the block itself. */
_VS_PIPE_PRIVATE void _vs_pipe_dblk_drop(const vs_pipe* p, _vs_pipe_dblk* b)
{
#ifdef _VS_PIPE_CUDA
    if (b->ev) cudaEventDestroy((cudaEvent_t)b->ev);
#endif
    _vs_pipe_dfree(p, b->ptr);
    vs_free(p->w, b);
}

/* zero: 1 zeroes the block (on the compute stream); | _VS_PIPE_BUF_RECV: for a
   receive's bytes (device path: _vs_pipe_fence_recv) */
#define _VS_PIPE_BUF_RECV 2
_VS_PIPE_PRIVATE void* _vs_pipe_buf(const vs_pipe* p, size_t bytes, int zero)
{
#ifdef _VS_PIPE_CUDA
    if (p->dev) {
        vs_pipe* q = (vs_pipe*)p;
        _vs_pipe_dblk **at = NULL, **it = (_vs_pipe_dblk**)&q->dcache;
        const size_t cls = _vs_pipe_dclass(bytes);
        const int msg = (zero & _VS_PIPE_BUF_RECV) != 0;
        zero &= 1;
        /* the smallest free block that fits, within twice the request's class,
           given back last (so one no run needs ages out). Receives keep their
           own blocks: a receive waits for the compute stream where its block
           was given back, and a receive's block goes back right after its copy
           out (early), while others go back after the units that used them
           last (the compute stream's tail): so the transfer overlaps the
           compute queued since. A receive takes another block when none of
           theirs is free, other users never take theirs. */
        for (; *it; it = &(*it)->next) {
            if ((*it)->bytes < bytes || (*it)->bytes / 2 > cls || ((*it)->msg && !msg)) continue;
            if (!at || (*it)->bytes < (*at)->bytes || ((*it)->bytes == (*at)->bytes && (*it)->msg > (*at)->msg))
                at = it;
        }
        _vs_pipe_dblk* b = at ? *at : NULL;
        if (b) {
            *at = b->next;
            q->cache_bytes -= b->bytes;
        } else {
            b = _VS_PIPE_NEW(p->w, _vs_pipe_dblk, 1);
            if (!b) return NULL;
            b->bytes = cls;
            if (!(b->ptr = _vs_pipe_dalloc(p, b->bytes))) {
                vs_free(p->w, b);
                return NULL;
            }
        }
        b->req = bytes;
        b->msg = msg;
        b->used = q->nruns;
        b->next = (_vs_pipe_dblk*)q->dlive;
        q->dlive = b;
        q->live_bytes += bytes;
        if (q->live_bytes > q->peak_bytes) q->peak_bytes = q->live_bytes;
        if (zero && cudaMemsetAsync(b->ptr, 0, bytes ? bytes : 1, (cudaStream_t)p->stream) != cudaSuccess) {
            _vs_pipe_buf_free(p, b->ptr);
            return NULL;
        }
        return b->ptr;
    }
#endif
    (void)zero; // (host blocks are always zeroed, as before the cache)
    vs_pipe* q = (vs_pipe*)p; // (the cache is the engine's bookkeeping, not the caller's state)
    _vs_pipe_blk** at = (_vs_pipe_blk**)&q->cache;
    while (*at && (*at)->bytes != bytes) at = &(*at)->next;
    _vs_pipe_blk* b = *at;
    if (b) {
        *at = b->next;
        q->cache_bytes -= bytes;
    } else {
        if (bytes > SIZE_MAX - _VS_PIPE_BLK) return NULL;
        b = (_vs_pipe_blk*)vs_alloc(p->w, _VS_PIPE_BLK + bytes);
        if (!b) return NULL;
        b->bytes = bytes;
    }
    memset((char*)b + _VS_PIPE_BLK, 0, bytes);
    q->live_bytes += bytes;
    if (q->live_bytes > q->peak_bytes) q->peak_bytes = q->live_bytes;
    return (char*)b + _VS_PIPE_BLK;
}

_VS_PIPE_PRIVATE void _vs_pipe_buf_free(const vs_pipe* p, void* ptr)
{
    if (!ptr) return;
    if (p->dev) {
        vs_pipe* q = (vs_pipe*)p;
        _vs_pipe_dblk** at = (_vs_pipe_dblk**)&q->dlive;
        while (*at && (*at)->ptr != ptr) at = &(*at)->next;
        _vs_pipe_dblk* b = *at;
        VS_ASSERT(b != NULL); // (a block the engine handed out)
        if (!b) return;
        *at = b->next;
#ifdef _VS_PIPE_CUDA
        cudaEvent_t ev = (cudaEvent_t)b->ev;
        if (!ev && cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) ev = NULL;
        b->ev = (void*)ev;
        b->ev_ok = ev && cudaEventRecord(ev, (cudaStream_t)p->stream) == cudaSuccess;
#endif
        b->next = (_vs_pipe_dblk*)q->dcache;
        q->dcache = b;
        q->cache_bytes += b->bytes;
        q->live_bytes -= b->req;
        return;
    }
    vs_pipe* q = (vs_pipe*)p;
    _vs_pipe_blk* b = (_vs_pipe_blk*)((char*)ptr - _VS_PIPE_BLK);
    b->next = (_vs_pipe_blk*)q->cache;
    q->cache = b;
    q->cache_bytes += b->bytes;
    q->live_bytes -= b->bytes;
}

_VS_PIPE_PRIVATE vs_result _vs_pipe_sync(const vs_pipe* p);

/* After a run: the cache keeps at most what the run had live at its peak (so
   shapes that change from step to step cannot make it grow without bound). */
_VS_PIPE_PRIVATE void _vs_pipe_cache_trim(vs_pipe* p)
{
    while (p->cache && p->cache_bytes > p->peak_bytes) {
        _vs_pipe_blk* b = (_vs_pipe_blk*)p->cache;
        p->cache = b->next;
        p->cache_bytes -= b->bytes;
        vs_free(p->w, b);
    }
    /* Device blocks stay while runs use them (a steady state allocates nothing);
       one that _VS_PIPE_DKEEP runs did not hand out goes (the shapes changed),
       freed in the compute stream's order (cudaFreeAsync; the world's hooks
       after a wait for the compute stream: the run's work may be queued still). */
    int aged = 0;
    for (_vs_pipe_dblk* b = (_vs_pipe_dblk*)p->dcache; b && !aged; b = b->next)
        aged = p->nruns - b->used >= _VS_PIPE_DKEEP;
    if (aged && !p->dasync) _vs_pipe_sync(p);
    for (_vs_pipe_dblk** at = (_vs_pipe_dblk**)&p->dcache; *at;) {
        _vs_pipe_dblk* b = *at;
        if (p->nruns - b->used < _VS_PIPE_DKEEP) {
            at = &b->next;
            continue;
        }
        *at = b->next;
        p->cache_bytes -= b->bytes;
        _vs_pipe_dblk_drop(p, b);
    }
    p->nruns++;
    p->last_peak = p->peak_bytes;
    p->peak_bytes = p->live_bytes;
}

/* Gives the cached blocks back (at vs_pipe_free). */
_VS_PIPE_PRIVATE void _vs_pipe_cache_drop(vs_pipe* p)
{
    _vs_pipe_blk* b = (_vs_pipe_blk*)p->cache;
    while (b) {
        _vs_pipe_blk* n = b->next;
        vs_free(p->w, b);
        b = n;
    }
    p->cache = NULL;
    for (int list = 0; list < 2; list++) { // device blocks: the free ones, and any still out
        _vs_pipe_dblk* d = (_vs_pipe_dblk*)(list ? p->dlive : p->dcache);
        while (d) {
            _vs_pipe_dblk* n = d->next;
            _vs_pipe_dblk_drop(p, d);
            d = n;
        }
    }
    p->dcache = p->dlive = NULL;
    p->cache_bytes = 0;
}

/* dst <- src on the compute stream; on the device path either side may be host
   memory, which must stay valid until the stream gets there. */
_VS_PIPE_PRIVATE vs_result _vs_pipe_copy(const vs_pipe* p, void* dst, const void* src, size_t bytes)
{
    if (!bytes || dst == src) return VS_OK;
#ifdef _VS_PIPE_CUDA
    if (p->dev) {
        cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)p->stream);
        return e == cudaSuccess ? VS_OK : _vs_pipe_cuerr(e, "cudaMemcpyAsync");
    }
#endif
    (void)p;
    memcpy(dst, src, bytes);
    return VS_OK;
}

/* The host waits for the compute stream (device path): on NCCL with the mesh
   communicator's deadline and fault watch (vs_sync_stream; the stream waits on
   the links' sends and receives, which a stalled or failed stage holds for
   good). Over a host transport (the tests' forced device path) the links
   complete on the host, so no peer holds the stream: a plain wait. query:
   first ask whether the stream is idle (e.g. after a copy to pageable memory:
   no event recorded and polled, no wait); 0 where it surely is not (the ask
   would be a second poll). */
_VS_PIPE_PRIVATE vs_result _vs_pipe_wait(const vs_pipe* p, int query)
{
#ifdef _VS_PIPE_CUDA
    if (p->dev) {
#ifdef VESCALE_NCCL
        vs_comm* c = vs_mesh_comm(p->desc.mesh);
        if (vs_comm_device(c) == 1)
            return query && cudaStreamQuery((cudaStream_t)p->stream) == cudaSuccess ? VS_OK
                                                                                    : vs_sync_stream(c, p->stream);
#endif
        cudaError_t e = cudaStreamSynchronize((cudaStream_t)p->stream);
        return e == cudaSuccess ? VS_OK : _vs_pipe_cuerr(e, "cudaStreamSynchronize");
    }
#endif
    (void)p, (void)query;
    return VS_OK;
}
_VS_PIPE_PRIVATE vs_result _vs_pipe_sync(const vs_pipe* p) { return _vs_pipe_wait(p, 1); }

/* What the compute stream has so far happens before what comes next on
   `stream` (device path; NULL or the compute stream: nothing to do). */
_VS_PIPE_PRIVATE vs_result _vs_pipe_fence_to(const vs_pipe* p, void* stream)
{
#ifdef _VS_PIPE_CUDA
    if (p->dev && stream && stream != p->stream) {
        cudaError_t e = cudaEventRecord((cudaEvent_t)p->send_ev, (cudaStream_t)p->stream);
        if (e == cudaSuccess) e = cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)p->send_ev, 0);
        return e == cudaSuccess ? VS_OK : _vs_pipe_cuerr(e, "ordering a stream after the compute stream");
    }
#endif
    (void)p, (void)stream;
    return VS_OK;
}

/* ... and on a link's stream. */
_VS_PIPE_PRIVATE vs_result _vs_pipe_fence(const vs_pipe* p, const _vs_pipe_link* l)
{
    return _vs_pipe_fence_to(p, l->stream);
}

_VS_PIPE_PRIVATE vs_result _vs_pipe_parse_spec(const char* fn, const char* tok, size_t n, char* name,
                                               _vs_pipe_spec* sp)
{
    sp->dt = VS_DTYPE_INVALID;
    sp->ndim = -1;
    const char* colon = (const char*)memchr(tok, ':', n);
    size_t nl = colon ? (size_t)(colon - tok) : n;
    if (nl == 0 || nl >= VS_PIPE_NAME_MAX)
        return vs_set_error(VS_ERR_INVALID, "%s: tensor name \"%.*s\" is empty or longer than %d bytes", fn, (int)n,
                            tok, VS_PIPE_NAME_MAX - 1);
    memcpy(name, tok, nl);
    name[nl] = 0;
    if (!colon) return VS_OK;
    const char* p = colon + 1;
    const char* end = tok + n;
    const char* br = (const char*)memchr(p, '[', (size_t)(end - p));
    size_t dl = br ? (size_t)(br - p) : (size_t)(end - p);
    if (dl) {
        int found = 0;
        for (int d = 1; d < VS_DTYPE_COUNT; d++)
            if (strlen(vs_dtype_name((vs_dtype)d)) == dl && !strncmp(vs_dtype_name((vs_dtype)d), p, dl)) {
                sp->dt = (vs_dtype)d;
                found = 1;
            }
        if (!found)
            return vs_set_error(VS_ERR_INVALID, "%s: tensor \"%s\": unknown dtype \"%.*s\"", fn, name, (int)dl, p);
    }
    if (!br) return VS_OK;
    p = br + 1;
    sp->ndim = 0;
    if (end[-1] != ']') return vs_set_error(VS_ERR_INVALID, "%s: tensor \"%s\": shape must end with ]", fn, name);
    end--;
    while (p < end) {
        if (sp->ndim == VS_PIPE_MAX_DIMS)
            return vs_set_error(VS_ERR_INVALID, "%s: tensor \"%s\": more than %d dims", fn, name, VS_PIPE_MAX_DIMS);
        const char* q = p;
        while (q < end && *q != ',') q++;
        if (q - p == 1 && *p == '*') sp->dim[sp->ndim++] = -1;
        else {
            int64_t v = 0;
            if (q == p) return vs_set_error(VS_ERR_INVALID, "%s: tensor \"%s\": an empty dim", fn, name);
            for (const char* c = p; c < q; c++) {
                if (*c < '0' || *c > '9' || v > ((int64_t)1 << 50))
                    return vs_set_error(VS_ERR_INVALID, "%s: tensor \"%s\": dim \"%.*s\" is not a count or *", fn,
                                        name, (int)(q - p), p);
                v = v * 10 + (*c - '0');
            }
            sp->dim[sp->ndim++] = v;
        }
        p = q < end ? q + 1 : q;
    }
    return VS_OK;
}

/* "h:f32[*,8]" */
_VS_PIPE_PRIVATE const char* _vs_pipe_spec_text(const char* name, const _vs_pipe_spec* sp, char* buf, size_t cap)
{
    size_t len = 0;
    _vs_pipe_cat(buf, cap, &len, "%s", name);
    if (sp->dt != VS_DTYPE_INVALID || sp->ndim >= 0) _vs_pipe_cat(buf, cap, &len, ":");
    if (sp->dt != VS_DTYPE_INVALID) _vs_pipe_cat(buf, cap, &len, "%s", vs_dtype_name(sp->dt));
    if (sp->ndim >= 0) {
        _vs_pipe_cat(buf, cap, &len, "[");
        for (int d = 0; d < sp->ndim; d++)
            if (sp->dim[d] < 0) _vs_pipe_cat(buf, cap, &len, "%s*", d ? "," : "");
            else _vs_pipe_cat(buf, cap, &len, "%s%lld", d ? "," : "", (long long)sp->dim[d]);
        _vs_pipe_cat(buf, cap, &len, "]");
    }
    return buf;
}

/* A tensor's actual dtype and shape: "f32[5,7]" (a scalar: "f32[]"). */
_VS_PIPE_PRIVATE const char* _vs_pipe_shape_text(vs_dtype dt, int ndim, const int64_t* shape, char* buf, size_t cap)
{
    size_t len = 0;
    _vs_pipe_cat(buf, cap, &len, "%s[", vs_dtype_name(dt));
    for (int d = 0; d < ndim; d++) _vs_pipe_cat(buf, cap, &len, "%s%lld", d ? "," : "", (long long)shape[d]);
    _vs_pipe_cat(buf, cap, &len, "]");
    return buf;
}

/* Do two specs admit a common tensor? */
_VS_PIPE_PRIVATE int _vs_pipe_spec_agree(const _vs_pipe_spec* a, const _vs_pipe_spec* b)
{
    if (a->dt && b->dt && a->dt != b->dt) return 0;
    if (a->ndim < 0 || b->ndim < 0) return 1;
    if (a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->dim[d] >= 0 && b->dim[d] >= 0 && a->dim[d] != b->dim[d]) return 0;
    return 1;
}

_VS_PIPE_PRIVATE int _vs_pipe_spec_fits(const _vs_pipe_spec* sp, vs_dtype dt, int ndim, const int64_t* shape)
{
    _vs_pipe_spec got;
    got.dt = dt;
    got.ndim = ndim;
    for (int d = 0; d < ndim; d++) got.dim[d] = shape[d];
    return _vs_pipe_spec_agree(sp, &got);
}

_VS_PIPE_PRIVATE int _vs_pipe_find(const vs_pipe* p, const char* name)
{
    for (int i = 0; i < p->ntensors; i++)
        if (!strcmp(p->t[i].name, name)) return i;
    return -1;
}

/* Reads a unit's inputs or outputs list into tensor ids (new names appended). */
_VS_PIPE_PRIVATE vs_result _vs_pipe_io(vs_pipe* p, int u, int out, const char* list, int* ids, _vs_pipe_spec* specs,
                                       int* n)
{
    const char* un = p->desc.units[u].name;
    *n = 0;
    if (!list) return VS_OK;
    const char* q = list;
    while (*q) {
        while (*q == ' ' || *q == ',') q++;
        if (!*q) break;
        const char* e = q;
        int depth = 0;
        while (*e && (depth || (*e != ',' && *e != ' '))) {
            depth += *e == '[' ? 1 : *e == ']' ? -1 : 0;
            e++;
        }
        if (*n == VS_PIPE_MAX_IO)
            return vs_set_error(VS_ERR_INVALID, "vs_pipe_init: unit \"%s\" has more than %d %s", un, VS_PIPE_MAX_IO,
                                out ? "outputs" : "inputs");
        char name[VS_PIPE_NAME_MAX];
        _VS_TRY(_vs_pipe_parse_spec("vs_pipe_init", q, (size_t)(e - q), name, &specs[*n]));
        int id = _vs_pipe_find(p, name);
        if (out) {
            if (id >= 0 && p->t[id].producer >= 0)
                return vs_set_error(VS_ERR_INVALID, "vs_pipe_init: tensor \"%s\" is made by unit \"%s\" and again by \"%s\"",
                                    name, p->desc.units[p->t[id].producer].name, un);
            if (id >= 0)
                return vs_set_error(VS_ERR_INVALID,
                                    "vs_pipe_init: unit \"%s\" makes \"%s\", which an earlier unit takes as an input "
                                    "(a unit's inputs must come from earlier units or the data callback)",
                                    un, name);
        }
        if (id < 0) {
            id = p->ntensors++;
            memcpy(p->t[id].name, name, sizeof name);
            p->t[id].producer = out ? u : -1;
            p->t[id].out_index = out ? *n : -1;
            p->t[id].spec = specs[*n];
        }
        ids[(*n)++] = id;
        q = e;
    }
    return VS_OK;
}

/* Fills the tensor tables, the chunk of each unit and the boundary sets. */
_VS_PIPE_PRIVATE vs_result _vs_pipe_analyse(vs_pipe* p)
{
    const vs_pipe_desc* d = &p->desc;
    const int U = d->nunits, K = p->plan.nchunks;
    size_t maxt = (size_t)U * 2 * VS_PIPE_MAX_IO;
    p->u = _VS_PIPE_NEW(p->w, _vs_pipe_uinfo, U);
    p->t = _VS_PIPE_NEW(p->w, _vs_pipe_tinfo, maxt);
    if (!p->u || !p->t) return vs_set_error(VS_ERR_NOMEM, "vs_pipe_init: out of memory");
    for (int k = 0; k < K; k++)
        for (int u = p->plan.first_unit[k]; u < p->plan.first_unit[k + 1]; u++) p->u[u].chunk = k;
    for (int u = 0; u < U; u++) {
        const vs_pipe_unit* un = &d->units[u];
        _VS_TRY(_vs_pipe_io(p, u, 0, un->inputs, p->u[u].in, p->u[u].in_spec, &p->u[u].nin));
        _VS_TRY(_vs_pipe_io(p, u, 1, un->outputs, p->u[u].out, p->u[u].out_spec, &p->u[u].nout));
    }
    char a[160], b[160];
    for (int u = 0; u < U; u++) // consumers agree with producers
        for (int i = 0; i < p->u[u].nin; i++) {
            const _vs_pipe_tinfo* t = &p->t[p->u[u].in[i]];
            if (t->producer < 0 && !d->data)
                return vs_set_error(VS_ERR_INVALID,
                                    "vs_pipe_init: unit \"%s\" takes \"%s\", which no earlier unit makes, and there is "
                                    "no data callback",
                                    d->units[u].name, t->name);
            if (t->producer >= 0 && !_vs_pipe_spec_agree(&t->spec, &p->u[u].in_spec[i]))
                return vs_set_error(VS_ERR_MISMATCH,
                                    "vs_pipe_init: tensor \"%s\": unit \"%s\" makes %s but unit \"%s\" takes %s",
                                    t->name, d->units[t->producer].name, _vs_pipe_spec_text(t->name, &t->spec, a, sizeof a),
                                    d->units[u].name, _vs_pipe_spec_text(t->name, &p->u[u].in_spec[i], b, sizeof b));
        }
    const _vs_pipe_uinfo* last = &p->u[U - 1];
    if (last->nout < 1)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_init: the last unit \"%s\" has no outputs; its first is the loss",
                            d->units[U - 1].name);
    p->loss_id = last->out[0];
    const _vs_pipe_spec* ls = &last->out_spec[0];
    if ((ls->dt && ls->dt != VS_F32) || ls->ndim > 0)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_init: the loss \"%s\" (the last unit's first output) must be an f32 scalar, not %s",
                            p->t[p->loss_id].name, _vs_pipe_spec_text(p->t[p->loss_id].name, ls, a, sizeof a));
    /* Boundary k: tensors made before chunk k and taken by a unit of chunk k or later. */
    p->boff = _VS_PIPE_NEW(p->w, int, K + 1);
    p->bset = _VS_PIPE_NEW(p->w, int, (size_t)K * (size_t)p->ntensors + 1);
    if (!p->boff || !p->bset) return vs_set_error(VS_ERR_NOMEM, "vs_pipe_init: out of memory");
    int n = 0;
    for (int k = 0; k < K; k++) {
        p->boff[k] = n;
        int first = p->plan.first_unit[k];
        for (int t = 0; t < p->ntensors; t++) {
            if (p->t[t].producer < 0 || p->t[t].producer >= first) continue;
            int used = 0;
            for (int u = first; u < U && !used; u++)
                for (int i = 0; i < p->u[u].nin; i++) used |= p->u[u].in[i] == t;
            if (used) p->bset[n++] = t;
        }
    }
    p->boff[K] = n;
    for (int k = 0; k < K; k++)
        if (p->boff[k + 1] - p->boff[k] > p->maxnt) p->maxnt = p->boff[k + 1] - p->boff[k];
    /* What each chunk of this stage holds per microbatch (its boundary inputs and
       its units' tensors), worked out once for _vs_pipe_release, and how many of
       this stage's chunks hold each tensor. */
    p->hoff = _VS_PIPE_NEW(p->w, int, K + 1);
    p->hset = _VS_PIPE_NEW(p->w, int, (size_t)K * (size_t)p->ntensors + 1);
    if (!p->hoff || !p->hset) return vs_set_error(VS_ERR_NOMEM, "vs_pipe_init: out of memory");
    n = 0;
    for (int k = 0; k < K; k++) {
        p->hoff[k] = n;
        if (p->plan.chunk_stage[k] != p->stage) continue;
        for (int t = 0; t < p->ntensors; t++) {
            int holds = 0;
            for (int i = p->boff[k]; i < p->boff[k + 1]; i++) holds |= p->bset[i] == t;
            for (int u = p->plan.first_unit[k]; u < p->plan.first_unit[k + 1]; u++) {
                for (int i = 0; i < p->u[u].nin; i++) holds |= p->u[u].in[i] == t;
                for (int i = 0; i < p->u[u].nout; i++) holds |= p->u[u].out[i] == t;
            }
            if (holds) p->hset[n++] = t;
            p->t[t].refs_here += holds;
        }
    }
    p->hoff[K] = n;
    for (int i = 0; i < last->nout; i++) p->t[last->out[i]].last_out = 1;
    return VS_OK;
}

_VS_PIPE_PRIVATE vs_result _vs_pipe_check_plan(const vs_pipe_desc* d, const vs_pipe_plan* pl, int P)
{
    if (pl->nunits != d->nunits)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_init: the plan has %d units, the desc %d", pl->nunits, d->nunits);
    if (pl->stages != P)
        return vs_set_error(VS_ERR_MISMATCH, "vs_pipe_init: the plan has %d stages but the mesh's PP dim is %d",
                            pl->stages, P);
    if (pl->nchunks < P || pl->nchunks > VS_PIPE_MAX_CHUNKS || pl->nchunks > d->nunits)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_init: the plan has %d chunks (%d stages .. %d units)", pl->nchunks,
                            P, d->nunits);
    if (pl->first_unit[0] != 0 || pl->first_unit[pl->nchunks] != d->nunits)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_init: the plan's chunks cover units %d..%d, not 0..%d",
                            pl->first_unit[0], pl->first_unit[pl->nchunks] - 1, d->nunits - 1);
    for (int st = 0; st < P; st++) {
        int holds = 0;
        for (int k = 0; k < pl->nchunks; k++) holds |= pl->chunk_stage[k] == st;
        if (!holds) return vs_set_error(VS_ERR_INVALID, "vs_pipe_init: the plan puts no chunk on stage %d", st);
    }
    for (int k = 0; k < pl->nchunks; k++) {
        if (pl->first_unit[k + 1] <= pl->first_unit[k])
            return vs_set_error(VS_ERR_INVALID, "vs_pipe_init: the plan's chunk %d is empty or out of order", k);
        if (pl->chunk_stage[k] < 0 || pl->chunk_stage[k] >= P)
            return vs_set_error(VS_ERR_INVALID, "vs_pipe_init: the plan puts chunk %d on stage %d (0..%d)", k,
                                pl->chunk_stage[k], P - 1);
    }
    for (int i = 0; i < d->nunits; i++) {
        const vs_pipe_unit* u = &d->units[i];
        if (!u->name || !u->name[0]) return vs_set_error(VS_ERR_INVALID, "vs_pipe_init: unit %d has no name", i);
        if (!u->forward) return vs_set_error(VS_ERR_NULL, "vs_pipe_init: unit \"%s\" has no forward", u->name);
        if (!u->backward && !(u->backward_input && u->backward_weight))
            return vs_set_error(VS_ERR_NULL,
                                "vs_pipe_init: unit \"%s\" needs backward, or both backward_input and backward_weight",
                                u->name);
        for (int j = 0; j < i; j++)
            if (!strcmp(d->units[j].name, u->name))
                return vs_set_error(VS_ERR_INVALID, "vs_pipe_init: units %d and %d are both named \"%s\"", j, i, u->name);
    }
    return VS_OK;
}

/* The communicators: one 2-rank communicator per direction between stages that
   pass data, so a send waiting for its receiver never holds up a receive (as
   one communicator's queue would: p2p is ordered per communicator, on threads as
   on NCCL). */
_VS_PIPE_PRIVATE vs_result _vs_pipe_links(vs_pipe* p)
{
    const int K = p->plan.nchunks;
    p->links = _VS_PIPE_NEW(p->w, _vs_pipe_link, 2 * K);
    if (!p->links) return vs_set_error(VS_ERR_NOMEM, "vs_pipe_init: out of memory");
    for (int k = 0; k + 1 < K; k++) {
        int a = p->plan.chunk_stage[k], b = p->plan.chunk_stage[k + 1];
        if (a == b) continue;
        for (int dir = 0; dir < 2; dir++) {
            int src = dir ? b : a, dst = dir ? a : b, have = 0;
            for (int i = 0; i < p->nlinks; i++) have |= p->links[i].src == src && p->links[i].dst == dst;
            if (have) continue;
            _vs_pipe_link* l = &p->links[p->nlinks++];
            l->src = src;
            l->dst = dst;
            int member = p->stage == src || p->stage == dst;
            vs_result r = vs_comm_split(p->pp, member ? 0 : VS_COLOR_NONE, p->stage == src ? 0 : 1, &l->c);
            if (r) return vs_set_error(r, "vs_pipe_init: communicator for stage %d -> %d: %s", src, dst, vs_last_error());
        }
    }
    return VS_OK;
}

struct vs_pipe_sched;
_VS_PIPE_PRIVATE vs_result _vs_pipe_prepost(vs_pipe* p, const vs_pipe_sched* s, _vs_pipe_link* l, int from);
_VS_PIPE_PRIVATE void _vs_pipe_drain(vs_pipe* p);

_VS_PIPE_PRIVATE _vs_pipe_link* _vs_pipe_link_of(vs_pipe* p, int src, int dst)
{
    for (int i = 0; i < p->nlinks; i++)
        if (p->links[i].src == src && p->links[i].dst == dst) return &p->links[i];
    return NULL;
}

_VS_PIPE_PRIVATE vs_comm* _vs_pipe_link_to(vs_pipe* p, int src, int dst)
{
    _vs_pipe_link* l = _vs_pipe_link_of(p, src, dst);
    return l ? l->c : NULL;
}

/* Where the buffers live and the streams: device memory when the PP
   communicator (the mesh's for one stage) is on NCCL; receives then run on the
   compute stream and sends on a stream of the engine's own. */
_VS_PIPE_PRIVATE vs_result _vs_pipe_streams(vs_pipe* p)
{
#ifdef _VS_PIPE_CUDA
    vs_comm* c = p->pp ? p->pp : vs_mesh_comm(p->mesh);
    p->dev = (_VS_PIPE_FORCE_DEVICE) || (c && vs_comm_device(c));
    if (!p->dev) return VS_OK; // (host buffers: no stream)
    p->stream = p->desc.stream ? p->desc.stream : c ? vs_comm_stream(c) : NULL;
    cudaStream_t st;
    cudaEvent_t ev;
    cudaError_t e = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    if (e != cudaSuccess) return _vs_pipe_cuerr(e, "vs_pipe_init: creating the send stream");
    p->send_stream = (void*)st;
    if ((e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming)) != cudaSuccess)
        return _vs_pipe_cuerr(e, "vs_pipe_init: creating the send event");
    p->send_ev = (void*)ev;
    if ((e = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking)) != cudaSuccess)
        return _vs_pipe_cuerr(e, "vs_pipe_init: creating the receive stream");
    p->recv_stream = (void*)st;
    vs_world_desc wd;
    memset(&wd, 0, sizeof wd);
    p->dasync = !_VS_PIPE_FORCE_DEVICE && vs_world_query_desc(p->w, &wd) == VS_OK && !wd.allocator.device_alloc;
    /* pinned host memory (NCCL takes it; the host reads it without a copy): the
       header of each link into this stage (the losses': hloss, at a run's end) */
    size_t hw = _VS_PIPE_HDR(p->maxnt), words = 1;
    for (int i = 0; i < p->nlinks; i++) words += p->links[i].dst == p->stage ? hw : 0;
    if ((e = cudaMallocHost(&p->pinned, words * sizeof(int64_t))) != cudaSuccess)
        return _vs_pipe_cuerr(e, "vs_pipe_init: pinned host memory");
    int64_t* at = (int64_t*)p->pinned + 1;
    for (int i = 0; i < p->nlinks; i++)
        if (p->links[i].dst == p->stage) p->links[i].hhdr = at, at += hw;
    /* Each link on its own stream (its communicator's): a send or receive waiting
       for its peer holds up that link only. (One send stream for all links held
       a send to one stage behind a send to another whose receiver was not
       there yet: interleaved on 4 stages deadlocked, each stage's sends behind
       one that waited for a receive behind another.) Forced over threads the
       links have no streams: the engine's two stand in. */
    for (int i = 0; i < p->nlinks; i++) {
        _vs_pipe_link* l = &p->links[i];
        l->stream = l->c ? vs_comm_stream(l->c) : NULL;
        l->ordered = l->stream != NULL;
        if (!l->stream) l->stream = l->src == p->stage ? p->send_stream : p->recv_stream;
    }
#else
    (void)p;
#endif
    return VS_OK;
}

VS_API vs_result vs_pipe_free(vs_pipe* p);

/* Every zero-is-default value of a desc, resolved in this one place (sokol's
   _sg_desc_defaults): vs_pipe_init keeps the result, vs_pipe_query_desc returns
   it. It checks nothing (vs_pipe_init checks the result); resolving again changes
   nothing. pp_dim becomes the mesh's own name of the dim; a name the mesh lacks
   stays, for vs_pipe_init to refuse. */
_VS_PIPE_PRIVATE void _vs_pipe_desc_defaults(vs_pipe_desc* d)
{
    if (d->loss == VS_PIPE_LOSS_DEFAULT) d->loss = VS_PIPE_LOSS_MEAN;
    d->fixed_shapes = d->fixed_shapes != 0;
    d->defer_loss = d->defer_loss != 0;
    const char* want = d->pp_dim ? d->pp_dim : "PP";
    for (int k = 0; d->mesh && k < vs_mesh_ndims(d->mesh); k++)
        if (!strcmp(vs_mesh_dim_name(d->mesh, k), want)) d->pp_dim = vs_mesh_dim_name(d->mesh, k);
}

VS_API vs_result vs_pipe_init(const vs_pipe_desc* desc, vs_pipe** out)
{
    if (!out) return vs_set_error(VS_ERR_NULL, "vs_pipe_init: out is NULL");
    *out = NULL;
    if (!desc) return vs_set_error(VS_ERR_NULL, "vs_pipe_init: desc is NULL");
    if (!desc->mesh) return vs_set_error(VS_ERR_NULL, "vs_pipe_init: desc.mesh is NULL");
    if (!desc->units || desc->nunits < 1)
        return vs_set_error(desc->units ? VS_ERR_INVALID : VS_ERR_NULL, "vs_pipe_init: desc.units %s (nunits %d)",
                            desc->units ? "is empty" : "is NULL", desc->nunits);
    if (!desc->plan) return vs_set_error(VS_ERR_NULL, "vs_pipe_init: desc.plan is NULL (see vs_pipe_split)");
    if ((int)desc->loss < 0 || (int)desc->loss > VS_PIPE_LOSS_SUM)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_init: desc.loss = %d is not a vs_pipe_reduce", (int)desc->loss);
    vs_pipe_desc d = *desc;
    _vs_pipe_desc_defaults(&d);
    int P = 1;
    vs_mesh* ppm = NULL;
    if (d.pp_dim) {
        P = vs_mesh_size(d.mesh, d.pp_dim);
        if (P < 1) return vs_set_error(VS_ERR_INVALID, "vs_pipe_init: the mesh has no dim \"%s\"", d.pp_dim);
    }
    _VS_TRY(_vs_pipe_check_plan(&d, d.plan, P));
    vs_world* w = vs_mesh_world(desc->mesh);
    vs_pipe* p = _VS_PIPE_NEW(w, vs_pipe, 1);
    if (!p) return vs_set_error(VS_ERR_NOMEM, "vs_pipe_init: out of memory");
    p->magic = _VS_PIPE_LIVE;
    p->loss_scale = 1.0;
    p->mesh = desc->mesh;
    p->w = w;
    p->desc = d;
    p->fixed = d.fixed_shapes;
    p->plan = *d.plan;
    p->P = P;
    vs_result r = VS_OK;
    if (P > 1) {
        r = vs_mesh_submesh(d.mesh, d.pp_dim, &ppm);
        if (r) goto fail;
        p->pp = vs_mesh_comm(ppm);
        p->stage = vs_comm_rank(p->pp);
    }
    if ((r = _vs_pipe_analyse(p)) != VS_OK) goto fail;
    if (P > 1 && (r = _vs_pipe_links(p)) != VS_OK) goto fail;
    if ((r = _vs_pipe_streams(p)) != VS_OK) goto fail;
    if ((r = vs_mesh_retain(desc->mesh)) != VS_OK) goto fail;
    *out = p;
    return VS_OK;
fail:
    p->mesh = NULL; // not retained yet
    vs_pipe_free(p);
    return r;
}

VS_API int vs_pipe_stage(const vs_pipe* p)
{
    if (!p) return vs_set_error(VS_ERR_NULL, "vs_pipe_stage: pipe is NULL");
    _VS_TRY(_VS_PIPE_GONE("vs_pipe_stage", p));
    return p->stage;
}

VS_API vs_result vs_pipe_query_desc(const vs_pipe* p, vs_pipe_desc* out)
{
    _VS_TRY(_VS_PIPE_GONE("vs_pipe_query_desc", p));
    if (!p || !out) return vs_set_error(VS_ERR_NULL, "vs_pipe_query_desc: %s is NULL", p ? "out" : "pipe");
    *out = p->desc; // resolved by vs_pipe_init (_vs_pipe_desc_defaults)
    out->plan = &p->plan;
    return VS_OK;
}

/* Frees what the last run kept. */
_VS_PIPE_PRIVATE void _vs_pipe_clear(vs_pipe* p)
{
    for (int i = 0; p->slots && i < p->M * p->ntensors; i++) {
        _vs_pipe_buf_free(p, p->slots[i].data);
        _vs_pipe_buf_free(p, p->slots[i].grad);
    }
    for (int i = 0; p->saved && i < p->desc.nunits * p->M; i++) _vs_pipe_buf_free(p, p->saved[i]);
    _vs_pipe_buf_free(p, p->dlosses);
    p->dlosses = NULL;
    vs_free(p->w, p->slots);
    vs_free(p->w, p->saved);
    vs_free(p->w, p->saved_bytes);
    vs_free(p->w, p->mb_loss);
    vs_free(p->w, p->pending);
    p->pending = NULL;
    p->slots = NULL;
    p->saved = NULL;
    p->saved_bytes = NULL;
    p->mb_loss = NULL;
    p->ran = 0;
}

_VS_PIPE_PRIVATE vs_result _vs_pipe_reap(vs_pipe* p, int all);

VS_API vs_result vs_pipe_free(vs_pipe* p)
{
    if (!p) return VS_OK;
    _VS_TRY(_VS_PIPE_GONE("vs_pipe_free", p));
    if (p->owner)
        return vs_set_error(VS_ERR_STATE, "vs_pipe_free: this pipe belongs to %s, which frees it; it is left as it was",
                            p->owner);
    _vs_pipe_sync(p); // (the units' work on what is let go here)
    _vs_pipe_clear(p);
    _vs_pipe_reap(p, 1);
    if (p->links) _vs_pipe_drain(p);
    for (int i = 0; p->links && i < p->nlinks; i++) {
        if (p->links[i].c) vs_comm_free(p->links[i].c);
        if (p->links[i].pre_hdr != p->links[i].hhdr) vs_free(p->w, p->links[i].pre_hdr);
    }
    _vs_pipe_cache_drop(p); // (stream-ordered frees go on the compute stream: before the streams go)
#ifdef _VS_PIPE_CUDA
    if (p->send_stream) cudaStreamDestroy((cudaStream_t)p->send_stream);
    if (p->recv_stream) cudaStreamDestroy((cudaStream_t)p->recv_stream);
    if (p->send_ev) cudaEventDestroy((cudaEvent_t)p->send_ev);
    if (p->pinned) cudaFreeHost(p->pinned);
    if (p->hloss) cudaFreeHost(p->hloss);
    if (p->dseed) vs_device_free(p->w, p->dseed);
#endif
    vs_free(p->w, p->fhist);
    for (int i = 0; p->links && i < p->nlinks; i++) vs_free(p->w, p->links[i].peer_pos);
    vs_free(p->w, p->links);
    vs_free(p->w, p->sends);
    vs_free(p->w, p->t0);
    vs_free(p->w, p->t1);
    vs_free(p->w, p->all_t);
    vs_free(p->w, (void*)p->all_t0);
    vs_free(p->w, (void*)p->all_t1);
    vs_free(p->w, p->all_n);
    vs_free(p->w, p->u);
    vs_free(p->w, p->t);
    vs_free(p->w, p->bset);
    vs_free(p->w, p->boff);
    vs_free(p->w, p->hset);
    vs_free(p->w, p->hoff);
    vs_mesh* m = p->mesh;
    p->magic = _VS_PIPE_DEAD;
    vs_free_later(p->w, p);
    if (m) vs_mesh_release(m);
    return VS_OK;
}

_VS_PIPE_PRIVATE void _vs_pipe_view(const vs_pipe* p, int id, const _vs_pipe_slot* s, vs_pipe_tensor* t)
{
    memset(t, 0, sizeof *t);
    t->name = p->t[id].name;
    t->dtype = s->dt;
    t->ndim = s->ndim;
    for (int d = 0; d < s->ndim; d++) t->shape[d] = s->shape[d];
    t->data = s->data;
    t->grad = s->grad;
}

/* Makes data input `id` of microbatch mb with the data callback, once. */
_VS_PIPE_PRIVATE vs_result _vs_pipe_data(vs_pipe* p, int mb, int id)
{
    _vs_pipe_slot* s = &p->slots[(size_t)mb * (size_t)p->ntensors + (size_t)id];
    if (s->data) return VS_OK;
    vs_pipe_tensor o;
    memset(&o, 0, sizeof o);
    o.name = p->t[id].name;
    _vs_pipe_spec any;
    any.dt = VS_DTYPE_INVALID;
    any.ndim = -1;
    struct _vs_pipe_rt rt = {p, mb, -1, &id, &any, 0};
    vs_pipe_call c;
    memset(&c, 0, sizeof c);
    c.user = p->desc.data_user;
    c.unit = -1;
    c.mb = mb;
    c.out = &o;
    c.n_out = 1;
    c._rt = &rt;
    c.stream = p->stream;
    vs_result r = p->desc.data(&c);
    if (r) return vs_set_error(r, "data callback for \"%s\", microbatch %d: %s", o.name, mb, vs_last_error());
    if (!s->data)
        return vs_set_error(VS_ERR_STATE, "data callback for \"%s\", microbatch %d made nothing (vs_pipe_output)", o.name,
                            mb);
    return VS_OK;
}

enum { _VS_PIPE_CALL_F, _VS_PIPE_CALL_B, _VS_PIPE_CALL_W, _VS_PIPE_CALL_BW, _VS_PIPE_CALL_RF /* recompute */ };

VS_API const char* vs_pipe_hook_point_name(vs_pipe_hook_point pt)
{
    static const char* const n[VS_PIPE_HOOK_POINT_COUNT] = {"invalid",        "forward_before", "forward_after",
                                                            "backward_before", "backward_after", "weight_before",
                                                            "weight_after"};
    return (int)pt > 0 && (int)pt < VS_PIPE_HOOK_POINT_COUNT ? n[pt] : "invalid";
}

/* The BEFORE point of part `what` of unit un (its AFTER is the next), or NONE:
   W of a unit without split parts does nothing (its full backward ran at B). */
_VS_PIPE_PRIVATE int _vs_pipe_hook_part(const vs_pipe_unit* un, int what)
{
    if (what == _VS_PIPE_CALL_F || what == _VS_PIPE_CALL_RF) return VS_PIPE_HOOK_FORWARD_BEFORE;
    if (what == _VS_PIPE_CALL_W) return un->backward_input ? VS_PIPE_HOOK_WEIGHT_BEFORE : VS_PIPE_HOOK_NONE;
    return VS_PIPE_HOOK_BACKWARD_BEFORE;
}

/* The event of point pt of part `what` of unit u, microbatch mb of M (the
   engine's and vs_pipe_hook_order's one description). */
_VS_PIPE_PRIVATE void _vs_pipe_hook_fill(const vs_pipe* p, int u, int mb, int M, int what, int pt, int fwd,
                                         vs_pipe_hook_event* e)
{
    const vs_pipe_unit* un = &p->desc.units[u];
    /* the last backward part: W, the full backward (BW), or B of a unit without split parts */
    const int last =
        what == _VS_PIPE_CALL_W || what == _VS_PIPE_CALL_BW || (what == _VS_PIPE_CALL_B && !un->backward_input);
    memset(e, 0, sizeof *e);
    e->point = pt;
    e->unit = u;
    e->chunk = p->u[u].chunk;
    e->mb = mb;
    e->mbs = M;
    e->recompute = what == _VS_PIPE_CALL_RF;
    e->grads_final = last && mb == M - 1 && (pt == VS_PIPE_HOOK_BACKWARD_AFTER || pt == VS_PIPE_HOOK_WEIGHT_AFTER);
    e->forward_only = fwd;
}

/* Calls desc.on_unit at point pt of part `what` of unit u, microbatch mb. */
_VS_PIPE_PRIVATE vs_result _vs_pipe_unit_hook(vs_pipe* p, int u, int mb, int what, int pt)
{
    vs_pipe_hook_event e;
    _vs_pipe_hook_fill(p, u, mb, p->M, what, pt, p->fwd, &e);
    e.instr = p->cur_pos;
    e.seq = p->hook_seq++;
    e.stream = p->stream;
    vs_result r = p->desc.on_unit(p->desc.unit_user, &e);
    if (r)
        return vs_set_error(r, "unit hook (vs_pipe_desc.on_unit) at %s of unit \"%s\"%s, microbatch %d: %s",
                            vs_pipe_hook_point_name((vs_pipe_hook_point)pt), p->desc.units[u].name,
                            e.recompute ? " (recompute)" : "", mb, vs_last_error());
    return VS_OK;
}

/* Runs one callback of unit u for microbatch mb, between its unit hooks. */
_VS_PIPE_PRIVATE vs_result _vs_pipe_call_unit(vs_pipe* p, int u, int mb, int what)
{
    const _vs_pipe_uinfo* ui = &p->u[u];
    const vs_pipe_unit* un = &p->desc.units[u];
    vs_pipe_tensor in[VS_PIPE_MAX_IO], out[VS_PIPE_MAX_IO];
    _vs_pipe_slot* row = &p->slots[(size_t)mb * (size_t)p->ntensors];
    char a[160];
    for (int i = 0; i < ui->nin; i++) {
        int id = ui->in[i];
        if (p->t[id].producer < 0) _VS_TRY(_vs_pipe_data(p, mb, id));
        _vs_pipe_view(p, id, &row[id], &in[i]);
        if (p->t[id].producer < 0) in[i].grad = NULL;
        if (what == _VS_PIPE_CALL_F && !_vs_pipe_spec_fits(&ui->in_spec[i], row[id].dt, row[id].ndim, row[id].shape)) {
            char g[160];
            return vs_set_error(VS_ERR_MISMATCH, "unit \"%s\", microbatch %d: input \"%s\" got %s, spec %s", un->name, mb,
                                p->t[id].name, _vs_pipe_shape_text(row[id].dt, row[id].ndim, row[id].shape, g, sizeof g),
                                _vs_pipe_spec_text(p->t[id].name, &ui->in_spec[i], a, sizeof a));
        }
    }
    for (int i = 0; i < ui->nout; i++) _vs_pipe_view(p, ui->out[i], &row[ui->out[i]], &out[i]);
    struct _vs_pipe_rt rt = {p, mb, u, ui->out, ui->out_spec, what == _VS_PIPE_CALL_RF};
    size_t at = (size_t)u * (size_t)p->M + (size_t)mb;
    vs_pipe_call c;
    memset(&c, 0, sizeof c);
    c.user = un->user;
    c.unit = u;
    c.mb = mb;
    c.chunk = ui->chunk;
    c.in = in;
    c.n_in = ui->nin;
    c.out = out;
    c.n_out = ui->nout;
    c.saved = p->saved[at];
    c.saved_bytes = p->saved_bytes[at];
    c._rt = &rt;
    c.stream = p->stream;
    vs_result r = VS_OK;
    const char* part = "forward";
    const int hook = p->desc.on_unit ? _vs_pipe_hook_part(un, what) : VS_PIPE_HOOK_NONE;
    if (hook) _VS_TRY(_vs_pipe_unit_hook(p, u, mb, what, hook));
    switch (what) {
    case _VS_PIPE_CALL_F: r = un->forward(&c); break;
    case _VS_PIPE_CALL_RF:
        part = "forward (recompute)";
        r = un->forward(&c);
        break;
    case _VS_PIPE_CALL_B:
        part = "backward_input";
        r = un->backward_input ? un->backward_input(&c) : un->backward(&c);
        break;
    case _VS_PIPE_CALL_W:
        part = "backward_weight";
        if (un->backward_input) r = un->backward_weight(&c); // else the full backward ran at B
        break;
    default:
        part = "backward";
        if (un->backward) r = un->backward(&c);
        else if (!(r = un->backward_input(&c))) r = un->backward_weight(&c);
    }
    if (r) return vs_set_error(r, "unit \"%s\" %s, microbatch %d: %s", un->name, part, mb, vs_last_error());
    /* A recomputed unit lets go of what it saves as soon as it is of no more use:
       after its forward (made again before B), and after its last backward part
       (B when the unit has no split backward, else W), not when the whole chunk's
       backward ends: on one stage, every unit's recomputed state would otherwise
       be live at once at the end of the backward, as much as without recompute. */
    if (un->recompute && !p->fwd &&
        (what == _VS_PIPE_CALL_F || what == _VS_PIPE_CALL_BW || what == _VS_PIPE_CALL_W ||
         (what == _VS_PIPE_CALL_B && !un->backward_input))) {
        _vs_pipe_buf_free(p, p->saved[at]);
        p->saved[at] = NULL;
        p->saved_bytes[at] = 0;
    }
    if (what == _VS_PIPE_CALL_F)
        for (int i = 0; i < ui->nout; i++)
            if (!row[ui->out[i]].data)
                return vs_set_error(VS_ERR_STATE, "unit \"%s\" forward, microbatch %d, did not make \"%s\" (vs_pipe_output)",
                                    un->name, mb, p->t[ui->out[i]].name);
    return hook ? _vs_pipe_unit_hook(p, u, mb, what, hook + 1) : VS_OK;
}

/* Gradient buffers of what chunk k makes or takes, zeroed, where missing. */
_VS_PIPE_PRIVATE vs_result _vs_pipe_grads(vs_pipe* p, int k, int mb)
{
    _vs_pipe_slot* row = &p->slots[(size_t)mb * (size_t)p->ntensors];
    for (int u = p->plan.first_unit[k]; u < p->plan.first_unit[k + 1]; u++)
        for (int io = 0; io < 2; io++)
            for (int i = 0; i < (io ? p->u[u].nout : p->u[u].nin); i++) {
                int id = io ? p->u[u].out[i] : p->u[u].in[i];
                _vs_pipe_slot* s = &row[id];
                if (p->t[id].producer < 0 || s->grad) continue;
                if (!s->data)
                    return vs_set_error(VS_ERR_STATE, "backward of chunk %d, microbatch %d: \"%s\" has no value", k, mb,
                                        p->t[id].name);
                s->grad = _vs_pipe_buf(p, s->bytes, 1);
                if (!s->grad) return vs_set_error(VS_ERR_NOMEM, "gradient of \"%s\": %zu bytes", p->t[id].name, s->bytes);
            }
    return VS_OK;
}

/* Chunk k of microbatch mb is done on this stage: let go of what it held. The
   last unit's outputs stay for vs_pipe_mb_output until the next run. */
_VS_PIPE_PRIVATE void _vs_pipe_release(vs_pipe* p, int k, int mb)
{
    _vs_pipe_slot* row = &p->slots[(size_t)mb * (size_t)p->ntensors];
    for (int h = p->hoff[k]; h < p->hoff[k + 1]; h++) {
        int t = p->hset[h];
        if (++row[t].released < p->t[t].refs_here) continue;
        _vs_pipe_buf_free(p, row[t].grad);
        row[t].grad = NULL;
        if (!p->t[t].last_out) {
            _vs_pipe_buf_free(p, row[t].data);
            row[t].data = NULL;
        }
    }
    for (int u = p->plan.first_unit[k]; u < p->plan.first_unit[k + 1]; u++) {
        size_t at = (size_t)u * (size_t)p->M + (size_t)mb;
        _vs_pipe_buf_free(p, p->saved[at]);
        p->saved[at] = NULL;
    }
}


/* Boundary b's header (grad: its gradients) of microbatch mb as this stage's
   slots hold the tensors: magic, grad, chunk, mb, count, bytes, then per tensor
   its id, dtype, ndim and dims (the unused dims 0). */
_VS_PIPE_PRIVATE vs_result _vs_pipe_hdr_fill(const vs_pipe* p, int b, int mb, int grad, int chunk, int64_t* h)
{
    int nt = p->boff[b + 1] - p->boff[b];
    const _vs_pipe_slot* row = &p->slots[(size_t)mb * (size_t)p->ntensors];
    memset(h, 0, _VS_PIPE_HDR(nt) * sizeof(int64_t));
    h[0] = _VS_PIPE_MAGIC;
    h[1] = grad;
    h[2] = chunk;
    h[3] = mb;
    h[4] = nt;
    size_t bytes = 0;
    for (int i = 0; i < nt; i++) {
        int id = p->bset[p->boff[b] + i];
        const _vs_pipe_slot* s = &row[id];
        if (!(grad ? s->grad : s->data))
            return vs_set_error(VS_ERR_STATE, "\"%s\" of microbatch %d has no %s", p->t[id].name, mb,
                                grad ? "gradient" : "value");
        int64_t* e = h + 6 + (size_t)i * (3 + VS_PIPE_MAX_DIMS);
        e[0] = id;
        e[1] = s->dt;
        e[2] = s->ndim;
        for (int d = 0; d < s->ndim; d++) e[3 + d] = s->shape[d];
        bytes += s->bytes;
    }
    h[5] = (int64_t)bytes;
    return VS_OK;
}

/* Fixed shapes (desc.fixed_shapes, device path): the header of boundary b's
   activations of microbatch mb as an earlier run sent them (h[0] 0: none yet),
   the same on the sending and the receiving stage; grown for a larger M when
   grow (NULL: out of memory, or beyond it when not grow). */
_VS_PIPE_PRIVATE int64_t* _vs_pipe_fhist(vs_pipe* p, int b, int mb, int grow)
{
    const size_t hw = _VS_PIPE_HDR(p->maxnt), nb = (size_t)p->plan.nchunks + 1;
    if (mb >= p->fhist_m) {
        if (!grow) return NULL;
        int m = mb + 1 > 2 * p->fhist_m ? mb + 1 : 2 * p->fhist_m;
        int64_t* n = _VS_PIPE_NEW(p->w, int64_t, (size_t)m * nb * hw); // (zeroed)
        if (!n) return NULL;
        if (p->fhist) memcpy(n, p->fhist, sizeof *n * (size_t)p->fhist_m * nb * hw);
        vs_free(p->w, p->fhist);
        p->fhist = n;
        p->fhist_m = m;
    }
    return p->fhist + ((size_t)mb * nb + (size_t)b) * hw;
}

/* A message the receiver takes without a header (device path): gradients (the
   receiver holds the activations: their shapes), and with fixed shapes the
   activations an earlier run already carried. Both ends decide alike. */
_VS_PIPE_PRIVATE int _vs_pipe_headless(vs_pipe* p, int b, int mb, int grad)
{
    if (!p->dev) return 0;
    if (grad) return 1;
    const int64_t* fh = p->fixed ? _vs_pipe_fhist(p, b, mb, 0) : NULL;
    return fh && fh[0] == _VS_PIPE_MAGIC;
}

/* Sends boundary `b`'s tensors (grads when grad) of microbatch mb to stage dst:
   a header (ids, dtypes, shapes) then the bytes, both asynchronous, from one
   buffer of engine memory that goes back when the send completed (host path:
   _vs_pipe_reap; device path: _vs_pipe_retire). Device path: packed on the
   compute stream, sent on the link's stream after it, without the header when
   the receiver knows the shapes (_vs_pipe_headless). */
_VS_PIPE_PRIVATE vs_result _vs_pipe_send(vs_pipe* p, int b, int mb, int grad, int chunk, int dst)
{
    int nt = p->boff[b + 1] - p->boff[b];
    const int headless = _vs_pipe_headless(p, b, mb, grad);
    size_t hdr = headless ? 0 : _VS_PIPE_HDR(nt) * sizeof(int64_t), bytes = 0;
    _vs_pipe_slot* row = &p->slots[(size_t)mb * (size_t)p->ntensors];
    for (int i = 0; i < nt; i++) bytes += row[p->bset[p->boff[b] + i]].bytes;
    _vs_pipe_link* l = _vs_pipe_link_of(p, p->stage, dst);
    if (!l) return vs_set_error(VS_ERR_STATE, "send: no link to stage %d", dst);
    if (p->nsends == p->scap) {
        int nc = p->scap ? 2 * p->scap : 16;
        _vs_pipe_inflight* n = _VS_PIPE_NEW(p->w, _vs_pipe_inflight, nc);
        if (!n) return vs_set_error(VS_ERR_NOMEM, "send: out of memory");
        if (p->nsends) memcpy(n, p->sends, sizeof *n * (size_t)p->nsends);
        vs_free(p->w, p->sends);
        p->sends = n;
        p->scap = nc;
    }
    // in the list at once, so a failure below lets go of its buffers with the rest
    _vs_pipe_inflight* sd = &p->sends[p->nsends++];
    memset(sd, 0, sizeof *sd);
    sd->link = (int)(l - p->links);
    sd->peer_pos = l->at < l->npeer ? l->peer_pos[l->at] : INT_MAX;
    l->at++;
    char* buf = (char*)(sd->buf = _vs_pipe_buf(p, hdr + bytes, 0));
    int64_t* h = p->dev ? (sd->hdr = (int64_t*)_vs_pipe_new(p->w, _VS_PIPE_HDR(nt), sizeof(int64_t))) : (int64_t*)buf;
    if (!buf || !h) return vs_set_error(VS_ERR_NOMEM, "send: %zu bytes", hdr + bytes);
    vs_result r = _vs_pipe_hdr_fill(p, b, mb, grad, chunk, h);
    if (r) return vs_set_error(r, "send: %s", vs_last_error());
    if (p->dev && p->fixed && !grad) { // the promise: the shapes of an earlier run (the receiver reads no header)
        int64_t* fh = _vs_pipe_fhist(p, b, mb, 1);
        if (!fh) return vs_set_error(VS_ERR_NOMEM, "send: out of memory");
        if (fh[0] != _VS_PIPE_MAGIC) memcpy(fh, h, _VS_PIPE_HDR(nt) * sizeof(int64_t));
        for (int i = 0; i < nt && headless; i++) {
            const int64_t* e = h + 6 + (size_t)i * (3 + VS_PIPE_MAX_DIMS);
            const int64_t* o = fh + 6 + (size_t)i * (3 + VS_PIPE_MAX_DIMS);
            if (!memcmp(e, o, (3 + VS_PIPE_MAX_DIMS) * sizeof(int64_t))) continue;
            char t1[160], t2[160];
            return vs_set_error(VS_ERR_MISMATCH,
                                "send: \"%s\" of microbatch %d is %s, in an earlier run %s: desc.fixed_shapes promises "
                                "every run the same shapes",
                                p->t[e[0]].name, mb,
                                _vs_pipe_shape_text((vs_dtype)e[1], (int)e[2], e + 3, t1, sizeof t1),
                                _vs_pipe_shape_text((vs_dtype)o[1], (int)o[2], o + 3, t2, sizeof t2));
        }
    }
    char* at = buf + hdr;
    for (int i = 0; i < nt; i++) {
        const _vs_pipe_slot* s = &row[p->bset[p->boff[b] + i]];
        _VS_TRY(_vs_pipe_copy(p, at, grad ? s->grad : s->data, s->bytes));
        at += s->bytes;
    }
    if (hdr) _VS_TRY(_vs_pipe_copy(p, buf, h, hdr)); // (device path: sd->hdr lives until the send completed)
    _VS_TRY(_vs_pipe_fence(p, l));
    vs_comm* c = l->c;
    r = hdr ? vs_send(c, buf, _VS_PIPE_HDR(nt), VS_I64, 1, &sd->w[0]) : VS_OK;
    if (!r && bytes) r = vs_send(c, buf + hdr, bytes, VS_U8, 1, &sd->w[1]);
    return r;
}

/* Checks a received header against what the schedule expects next and
   against itself (it must describe exactly the bytes that follow); *bytes gets
   their count. */
_VS_PIPE_PRIVATE vs_result _vs_pipe_hdr_check(const int64_t* h, int mb, int grad, int chunk, int nt, size_t* bytes)
{
    vs_result r = VS_OK;
    size_t sum = 0;
    if (h[0] != _VS_PIPE_MAGIC || h[1] != grad || h[2] != chunk || h[3] != mb || h[4] != nt) {
        r = vs_set_error(VS_ERR_MISMATCH,
                         "got the %s of chunk %lld, microbatch %lld (%lld tensors) where the schedule expects the %s "
                         "of chunk %d, microbatch %d (%d tensors): the stages run different schedules",
                         h[1] ? "gradients" : "activations", (long long)h[2], (long long)h[3], (long long)h[4],
                         grad ? "gradients" : "activations", chunk, mb, nt);
        return r;
    }
    *bytes = (size_t)h[5];
    for (int i = 0; i < nt; i++) { // the header must describe exactly the bytes that follow
        const int64_t* e = h + 6 + (size_t)i * (3 + VS_PIPE_MAX_DIMS);
        size_t n = vs_dtype_size((vs_dtype)(e[1] > 0 && e[1] < VS_DTYPE_COUNT ? e[1] : 0));
        if (!n || e[2] < 0 || e[2] > VS_PIPE_MAX_DIMS) n = SIZE_MAX;
        for (int d = 0; n != SIZE_MAX && d < (int)e[2]; d++)
            n = e[3 + d] < 0 || (e[3 + d] && n > SIZE_MAX / 2 / (size_t)e[3 + d]) ? SIZE_MAX : n * (size_t)e[3 + d];
        if (n == SIZE_MAX || sum > SIZE_MAX / 2 - n) {
            r = vs_set_error(VS_ERR_MISMATCH, "a received header describes tensor %d with a bad dtype or shape", i);
            return r;
        }
        sum += n;
    }
    if (sum != *bytes) {
        r = vs_set_error(VS_ERR_MISMATCH, "a received header says %zu bytes, its tensors %zu", *bytes, sum);
        return r;
    }
    return VS_OK;
}

/* Takes boundary b's tensors (or their grads) of microbatch mb out of a
   received message: header h, bytes at buf (copies on the compute stream). */
_VS_PIPE_PRIVATE vs_result _vs_pipe_unpack(vs_pipe* p, int b, int mb, int grad, const int64_t* h, const char* at)
{
    int nt = p->boff[b + 1] - p->boff[b];
    _vs_pipe_slot* row = &p->slots[(size_t)mb * (size_t)p->ntensors];
    for (int i = 0; i < nt; i++) {
        const int64_t* e = h + 6 + (size_t)i * (3 + VS_PIPE_MAX_DIMS);
        int id = p->bset[p->boff[b] + i];
        _vs_pipe_slot* s = &row[id];
        size_t n = vs_dtype_size((vs_dtype)e[1]);
        for (int d = 0; d < (int)e[2]; d++) n *= (size_t)e[3 + d];
        if (e[0] != id || (grad && (e[1] != s->dt || e[2] != s->ndim || n != s->bytes)))
            return vs_set_error(VS_ERR_MISMATCH, "received tensor %d of the message is not \"%s\" as this stage has it", i,
                                p->t[id].name);
        if (grad) {
            if (!s->grad && !(s->grad = _vs_pipe_buf(p, n, 0))) return vs_set_error(VS_ERR_NOMEM, "receive: %zu bytes", n);
            _VS_TRY(_vs_pipe_copy(p, s->grad, at, n));
        } else if (!s->data) { // (a stage that made it itself keeps its own: the same bits)
            s->dt = (vs_dtype)e[1];
            s->ndim = (int)e[2];
            for (int d = 0; d < s->ndim; d++) s->shape[d] = e[3 + d];
            s->bytes = n;
            if (!(s->data = _vs_pipe_buf(p, n, 0))) return vs_set_error(VS_ERR_NOMEM, "receive: %zu bytes", n);
            _VS_TRY(_vs_pipe_copy(p, s->data, at, n));
        }
        at += n;
    }
    return VS_OK;
}

/* Device path: the sends of link l (NULL: all) whose receiver takes them before
   its instruction `before` are complete in the compute stream's order: the
   compute stream waits for each (vs_wait_stream: done already unless l is
   NULL, the run's end) and its buffer goes back to the cache, for users on
   the compute stream or after it. A buffer is never reused before that: a
   user fenced after the compute stream (a receive) waiting for a send whose
   receiver waits for this stage would deadlock.

   Called where the schedule
   proves the send received: the receiver has since sent this stage a message
   that the compute stream waited for, sent after its own compute stream waited
   for the first (else at the run's end). */
_VS_PIPE_PRIVATE vs_result _vs_pipe_retire(vs_pipe* p, const _vs_pipe_link* l, int before)
{
    vs_result r = VS_OK;
    int k = 0, li = l ? (int)(l - p->links) : -1;
    for (int i = 0; i < p->nsends; i++) {
        _vs_pipe_inflight* sd = &p->sends[i];
        if (l && (sd->link != li || sd->peer_pos >= before)) {
            p->sends[k++] = *sd;
            continue;
        }
        for (int j = 0; j < 2; j++) {
            vs_result rj = sd->w[j] ? vs_wait_stream(sd->w[j], p->stream) : VS_OK;
            if (rj && !r) r = rj;
        }
        _vs_pipe_buf_free(p, sd->buf);
        vs_free(p->w, sd->hdr);
    }
    p->nsends = k;
    return r;
}

/* Device path, at a run's start: each link's messages in the peer's order
   (_vs_pipe_link.peer_pos) from the schedule every stage runs. */
_VS_PIPE_PRIVATE vs_result _vs_pipe_peer_order(vs_pipe* p, const vs_pipe_sched* s)
{
    for (int i = 0; i < p->nlinks; i++) {
        _vs_pipe_link* l = &p->links[i];
        l->at = l->npeer = 0;
        if (l->src != p->stage && l->dst != p->stage) continue;
        const int peer = l->src == p->stage ? l->dst : l->src, recvs = l->src == p->stage;
        for (int j = 0; j < s->len[peer]; j++) {
            const vs_pipe_instr* in = &s->ins[peer][j];
            int other = -1;
            if (recvs && (in->op == VS_PIPE_RECV_F || in->op == VS_PIPE_RECV_B))
                other = s->chunk_stage[in->op == VS_PIPE_RECV_F ? in->chunk - 1 : in->chunk + 1];
            else if (!recvs && (in->op == VS_PIPE_SEND_F || in->op == VS_PIPE_SEND_B))
                other = s->chunk_stage[in->op == VS_PIPE_SEND_F ? in->chunk + 1 : in->chunk - 1];
            if (other != p->stage) continue;
            if (l->npeer == l->peer_cap) {
                int nc = l->peer_cap ? 2 * l->peer_cap : 32;
                int* n = _VS_PIPE_NEW(p->w, int, nc);
                if (!n) return vs_set_error(VS_ERR_NOMEM, "vs_pipe_run: out of memory");
                if (l->npeer) memcpy(n, l->peer_pos, sizeof *n * (size_t)l->npeer);
                vs_free(p->w, l->peer_pos);
                l->peer_pos = n;
                l->peer_cap = nc;
            }
            l->peer_pos[l->npeer++] = j;
        }
    }
    return VS_OK;
}

#ifdef _VS_PIPE_CUDA
/* A receive into engine block buf on link lk waits for the compute stream where
   the block was last given back (its event), so the transfer overlaps the
   compute queued since; a block without one (new: cudaMallocAsync'd on the
   compute stream) after the compute stream so far. */
_VS_PIPE_PRIVATE vs_result _vs_pipe_fence_recv(const vs_pipe* p, const _vs_pipe_link* lk, void* buf)
{
    const _vs_pipe_dblk* b = (const _vs_pipe_dblk*)p->dlive; // (the block just handed out: the first)
    while (b && b->ptr != buf) b = b->next;
    if (!b || !b->ev_ok || !lk->stream || lk->stream == p->stream) return _vs_pipe_fence(p, lk);
    cudaError_t e = cudaStreamWaitEvent((cudaStream_t)lk->stream, (cudaEvent_t)b->ev, 0);
    return e == cudaSuccess ? VS_OK : _vs_pipe_cuerr(e, "ordering a receive after its block's last use");
}

/* Device path. Gradients, and with fixed shapes activations whose shapes an
   earlier run carried, come without a header (_vs_pipe_headless): the bytes'
   receive is posted on the link's stream and the compute stream waits for it
   (vs_wait_stream, the watchdog's deadline): the host waits for nothing. Else
   the header lands in pinned host memory (received ahead when the schedule
   allows, _vs_pipe_prepost) and the host waits for it (the shapes of the
   callbacks' tensors are host values); the bytes follow as above. The bytes'
   receive is ordered after their block's last use (_vs_pipe_fence_recv). */
_VS_PIPE_PRIVATE vs_result _vs_pipe_drecv(vs_pipe* p, int b, int mb, int grad, int chunk, int src)
{
    int nt = p->boff[b + 1] - p->boff[b];
    size_t bytes = 0;
    _vs_pipe_link* lk = _vs_pipe_link_of(p, src, p->stage);
    if (!lk || !lk->hhdr) return vs_set_error(VS_ERR_STATE, "receive: no link from stage %d", src);
    const int spos = lk->at < lk->npeer ? lk->peer_pos[lk->at] : -1; // the sender's instruction
    lk->at++;
    const int64_t* h = lk->hhdr;
    int64_t* fh = p->fixed && !grad ? _vs_pipe_fhist(p, b, mb, 1) : NULL;
    if (p->fixed && !grad && !fh) return vs_set_error(VS_ERR_NOMEM, "receive: out of memory");
    vs_result r = VS_OK;
    const int headless = _vs_pipe_headless(p, b, mb, grad);
    if (headless && grad) { // the shapes of the activations this stage holds
        _VS_TRY(_vs_pipe_hdr_fill(p, b, mb, 0, chunk, lk->hhdr)); // (the values' shapes: their gradients')
        lk->hhdr[1] = 1;
    } else if (headless) {
        h = fh;
    } else {
        vs_work* hw = lk->pre_hw; // received ahead (posted when the previous one was taken), or now
        if (hw && lk->pre_hn != _VS_PIPE_HDR(nt)) // (cannot be: the same schedule chose both)
            return vs_set_error(VS_ERR_STATE, "receive: the header received ahead has %zu words, this one %zu",
                                lk->pre_hn, _VS_PIPE_HDR(nt));
        lk->pre_hw = NULL;
        if (!hw) r = vs_recv(lk->c, lk->hhdr, _VS_PIPE_HDR(nt), VS_I64, 0, &hw);
        if (!r) r = vs_wait(hw); // (the host reads it: one wait per message with a header)
        if (r) return r;
    }
    _VS_TRY(_vs_pipe_hdr_check(h, mb, grad, chunk, nt, &bytes));
    if (fh && fh[0] != _VS_PIPE_MAGIC) memcpy(fh, h, _VS_PIPE_HDR(nt) * sizeof(int64_t));
    char* buf = NULL;
    if (bytes) {
        if (!(buf = (char*)_vs_pipe_buf(p, bytes, _VS_PIPE_BUF_RECV)))
            return vs_set_error(VS_ERR_NOMEM, "receive: %zu bytes", bytes);
        vs_work* w = NULL;
        if ((r = _vs_pipe_fence_recv(p, lk, buf)) == VS_OK && (r = vs_recv(lk->c, buf, bytes, VS_U8, 0, &w)) == VS_OK)
            r = vs_wait_stream(w, p->stream); // (no streams, forced over threads: vs_wait)
        if (r) {
            _vs_pipe_buf_free(p, buf);
            return r;
        }
    }
    r = _vs_pipe_unpack(p, b, mb, grad, h, buf);
    _vs_pipe_buf_free(p, buf); // (its copies out are queued on the compute stream)
    /* A message came (or its header): the sender sent it after every
       instruction before spos, its receives of this stage's sends included,
       each waited for on its compute stream before it: so those sends are done
       once this stage's compute stream has waited for this message (above) */
    if (!r && (bytes || !headless)) r = _vs_pipe_retire(p, _vs_pipe_link_of(p, p->stage, src), spos);
    if (!r && p->cur_s) r = _vs_pipe_prepost(p, p->cur_s, lk, p->cur_pos + 1); // the next header, ahead
    return r;
}
#endif

/* Receives boundary b's tensors (or their grads) of microbatch mb from stage src
   (the device path: _vs_pipe_drecv). Host path: the header first (it says how
   much follows), received ahead when the schedule allows (_vs_pipe_prepost). */
_VS_PIPE_PRIVATE vs_result _vs_pipe_recv(vs_pipe* p, int b, int mb, int grad, int chunk, int src)
{
#ifdef _VS_PIPE_CUDA
    if (p->dev) return _vs_pipe_drecv(p, b, mb, grad, chunk, src);
#endif
    int nt = p->boff[b + 1] - p->boff[b];
    int64_t hbuf[_VS_PIPE_HDR(4)];
    size_t hn = _VS_PIPE_HDR(nt);
    int64_t* h = hn <= sizeof hbuf / sizeof hbuf[0] ? hbuf : (int64_t*)_vs_pipe_new(p->w, hn, sizeof(int64_t));
    vs_comm* c = _vs_pipe_link_to(p, src, p->stage);
    char* buf = NULL;
    size_t bytes = 0;
    vs_result r = VS_OK;
    _vs_pipe_link* lk = _vs_pipe_link_of(p, src, p->stage);
    if (!h) return vs_set_error(VS_ERR_NOMEM, "receive: out of memory");
    if (lk && lk->pre_err) { // the header's receive ahead failed: its communicator says why (aborted, timed out)
        vs_result e = lk->pre_err;
        lk->pre_err = VS_OK;
        r = vs_recv(c, h, hn, VS_I64, 0, NULL);
        if (!r) r = vs_set_error(e, "receive: the header received ahead failed (%s)", vs_result_string(e));
        goto done;
    }
    if (lk && (lk->pre_hw || lk->pre_hdone)) { // received ahead
        if (lk->pre_hn != hn) { // (cannot be: the same schedule chose both)
            r = vs_set_error(VS_ERR_STATE, "receive: the header received ahead has %zu words, this one %zu", lk->pre_hn, hn);
            goto done;
        }
        if (!lk->pre_hdone) {
            r = vs_wait(lk->pre_hw);
            lk->pre_hw = NULL;
            lk->pre_hdone = 1;
            if (r) goto done;
        }
        memcpy(h, lk->pre_hdr, hn * sizeof(int64_t));
        if ((r = _vs_pipe_hdr_check(h, mb, grad, chunk, nt, &bytes)) != VS_OK) goto done;
        if (lk->pre_bw) {
            r = vs_wait(lk->pre_bw);
            lk->pre_bw = NULL;
        } else if (bytes) {
            if (!(lk->pre_buf = (char*)_vs_pipe_buf(p, bytes, 0))) r = vs_set_error(VS_ERR_NOMEM, "receive: %zu bytes", bytes);
            else r = vs_recv(c, lk->pre_buf, bytes, VS_U8, 0, NULL);
        }
        buf = lk->pre_buf; // (freed below, as a buffer of this call)
        lk->pre_buf = NULL;
        lk->pre_hdone = 0;
        if (r) goto done;
    } else {
        if ((r = vs_recv(c, h, hn, VS_I64, 0, NULL)) != VS_OK) goto done;
        if ((r = _vs_pipe_hdr_check(h, mb, grad, chunk, nt, &bytes)) != VS_OK) goto done;
        if (bytes) {
            buf = (char*)_vs_pipe_buf(p, bytes, 0);
            if (!buf) {
                r = vs_set_error(VS_ERR_NOMEM, "receive: %zu bytes", bytes);
                goto done;
            }
            if ((r = vs_recv(c, buf, bytes, VS_U8, 0, NULL)) != VS_OK) goto done;
        }
    }
    if ((r = _vs_pipe_unpack(p, b, mb, grad, h, buf)) != VS_OK) goto done;
    if (lk && p->cur_s) r = _vs_pipe_prepost(p, p->cur_s, lk, p->cur_pos + 1); // the next one, ahead
done:
    if (buf) _vs_pipe_buf_free(p, buf);
    if (h != hbuf) vs_free(p->w, h);
    return r;
}

/* Completes the sends that are done (all of them when all). */
_VS_PIPE_PRIVATE vs_result _vs_pipe_reap(vs_pipe* p, int all)
{
    vs_result r = VS_OK;
    int k = 0;
    for (int i = 0; i < p->nsends; i++) {
        _vs_pipe_inflight* sd = &p->sends[i];
        int done = 1;
        for (int j = 0; j < 2 && !all; j++) {
            int dj = 1;
            if (sd->w[j] && vs_test(sd->w[j], &dj) == VS_OK && !dj) done = 0;
        }
        if (!done) {
            p->sends[k++] = *sd;
            continue;
        }
        for (int j = 0; j < 2; j++) {
            vs_result rj = sd->w[j] ? vs_wait(sd->w[j]) : VS_OK;
            if (rj && !r) r = rj;
        }
        _vs_pipe_buf_free(p, sd->buf);
        vs_free(p->w, sd->hdr);
    }
    p->nsends = k;
    return r;
}

_VS_PIPE_PRIVATE double _vs_pipe_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The calling thread's CPU time; the monotonic clock where there is no thread
   CPU clock (a hook then shows no waiting). */
_VS_PIPE_PRIVATE double _vs_pipe_cpu_now(void)
{
#ifdef CLOCK_THREAD_CPUTIME_ID
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
#endif
    return _vs_pipe_now();
}

/* A chunk's microbatch is let go after its last backward part and, when it
   sends input gradients, after that send (which copies them). */
_VS_PIPE_PRIVATE void _vs_pipe_part_done(vs_pipe* p, int k, int mb)
{
    if (--p->pending[(size_t)k * (size_t)p->M + (size_t)mb] == 0) _vs_pipe_release(p, k, mb);
}

/* Runs instruction in of this stage. */
_VS_PIPE_PRIVATE vs_result _vs_pipe_exec(vs_pipe* p, const vs_pipe_sched* s, const vs_pipe_instr* in)
{
    const int k = in->chunk, mb = in->mb, K = p->plan.nchunks;
    const int lo = p->plan.first_unit[k], hi = p->plan.first_unit[k + 1];
    (void)s;
    switch (in->op) {
    case VS_PIPE_F:
        for (int u = lo; u < hi; u++) _VS_TRY(_vs_pipe_call_unit(p, u, mb, _VS_PIPE_CALL_F));
        if (k == K - 1) {
            const _vs_pipe_slot* ls = &p->slots[(size_t)mb * (size_t)p->ntensors + (size_t)p->loss_id];
            if (ls->dt != VS_F32 || ls->ndim != 0)
                return vs_set_error(VS_ERR_MISMATCH, "the loss \"%s\" is %s %dD, not an f32 scalar", p->t[p->loss_id].name,
                                    vs_dtype_name(ls->dt), ls->ndim);
            // (device path: into device memory, all M copied back at the run's end)
            _VS_TRY(_vs_pipe_copy(p, p->dev ? (void*)&p->dlosses[mb] : (void*)&p->mb_loss[mb], ls->data, sizeof(float)));
        }
        if (p->fwd) _vs_pipe_part_done(p, k, mb); // (device: what reuses the memory is ordered after, on the stream)
        return VS_OK;
    case VS_PIPE_B:
    case VS_PIPE_BW:
        _VS_TRY(_vs_pipe_grads(p, k, mb));
        if (k == K - 1) // seed d(loss)/d(loss_mb): 1 or 1/M (p->seed), as one device's loop (device: from dseed)
            _VS_TRY(_vs_pipe_copy(p, p->slots[(size_t)mb * (size_t)p->ntensors + (size_t)p->loss_id].grad,
                                  p->dseed ? (const void*)p->dseed : (const void*)&p->seed, sizeof p->seed));
        for (int u = hi - 1; u >= lo; u--) {
            if (p->desc.units[u].recompute) _VS_TRY(_vs_pipe_call_unit(p, u, mb, _VS_PIPE_CALL_RF));
            _VS_TRY(_vs_pipe_call_unit(p, u, mb, in->op == VS_PIPE_B ? _VS_PIPE_CALL_B : _VS_PIPE_CALL_BW));
        }
        if (in->op == VS_PIPE_BW) _vs_pipe_part_done(p, k, mb);
        return VS_OK;
    case VS_PIPE_W:
        for (int u = hi - 1; u >= lo; u--) _VS_TRY(_vs_pipe_call_unit(p, u, mb, _VS_PIPE_CALL_W));
        _vs_pipe_part_done(p, k, mb);
        return VS_OK;
    case VS_PIPE_SEND_F:
        _VS_TRY(_vs_pipe_send(p, k + 1, mb, 0, k, p->plan.chunk_stage[k + 1]));
        if (p->fwd) _vs_pipe_part_done(p, k, mb); // (packed: the message holds its own copy)
        return VS_OK;
    case VS_PIPE_RECV_F: return _vs_pipe_recv(p, k, mb, 0, k - 1, p->plan.chunk_stage[k - 1]);
    case VS_PIPE_SEND_B:
        _VS_TRY(_vs_pipe_send(p, k, mb, 1, k, p->plan.chunk_stage[k - 1]));
        _vs_pipe_part_done(p, k, mb); // the message holds its own copy
        return VS_OK;
    case VS_PIPE_RECV_B: return _vs_pipe_recv(p, k + 1, mb, 1, k + 1, p->plan.chunk_stage[k + 1]);
    case VS_PIPE_SYNC: return p->desc.on_sync ? p->desc.on_sync(p->desc.hook_user, k) : VS_OK;
    case VS_PIPE_STEP: return p->desc.on_step ? p->desc.on_step(p->desc.hook_user) : VS_OK;
    default: return vs_set_error(VS_ERR_INVALID, "unknown instruction %d", in->op);
    }
}

/* Posts (device path too: into the link's pinned header) the header receive of the next message this stage expects
   on link l, the first receive from l->src at or after position `from`. */
_VS_PIPE_PRIVATE vs_result _vs_pipe_prepost(vs_pipe* p, const vs_pipe_sched* s, _vs_pipe_link* l, int from)
{
    /* (device path with the world's hooks: none ahead, a hook that waits for the
       device would wait for the receive posted ahead, whose sender may be in the
       same wait) */
    if (l->dst != p->stage || l->pre_hw || l->pre_hdone || (p->dev && !p->dasync)) return VS_OK;
    const int st = p->stage;
    for (int i = from; i < s->len[st]; i++) {
        const vs_pipe_instr* in = &s->ins[st][i];
        if (in->op != VS_PIPE_RECV_F && in->op != VS_PIPE_RECV_B) continue;
        int src = s->chunk_stage[in->op == VS_PIPE_RECV_F ? in->chunk - 1 : in->chunk + 1];
        if (src != l->src) continue;
        int b = in->op == VS_PIPE_RECV_F ? in->chunk : in->chunk + 1;
        if (_vs_pipe_headless(p, b, in->mb, in->op == VS_PIPE_RECV_B)) return VS_OK; // (no header comes)
        size_t hn = _VS_PIPE_HDR(p->boff[b + 1] - p->boff[b]);
        char t[24];
        if (p->dev && !l->pre_hdr) l->pre_hdr = l->hhdr; // (device path: the link's pinned header)
        if (!l->pre_hdr && !(l->pre_hdr = _VS_PIPE_NEW(p->w, int64_t, _VS_PIPE_HDR(p->maxnt))))
            return vs_set_error(VS_ERR_NOMEM, "posting ahead the receive of instruction %d (%s) from stage %d: out of memory",
                                i, _vs_pipe_itext(in, t), src);
        l->pre_hn = hn;
        vs_result r = vs_recv(l->c, l->pre_hdr, hn, VS_I64, 0, &l->pre_hw);
        if (r)
            return vs_set_error(r, "posting ahead the receive of instruction %d (%s) from stage %d: %s", i,
                                _vs_pipe_itext(in, t), src, vs_last_error());
        return VS_OK;
    }
    return VS_OK;
}

/* Host path, between instructions: a header that came in gets its bytes'
   receive posted now, so they are copied while this stage computes. */
_VS_PIPE_PRIVATE void _vs_pipe_progress(vs_pipe* p)
{
    for (int i = 0; i < p->nlinks && !p->dev; i++) { // (device path: the bytes follow the header on the link's stream)
        _vs_pipe_link* l = &p->links[i];
        int done = 0;
        if (!l->pre_hw || vs_test(l->pre_hw, &done) != VS_OK || !done) continue;
        vs_result r = vs_wait(l->pre_hw);
        l->pre_hw = NULL;
        if (r) { // (the receive reports it: not the header left from the message before)
            l->pre_err = r;
            vs_clear_error();
            continue;
        }
        l->pre_hdone = 1;
        size_t bytes = (size_t)l->pre_hdr[5];
        if (l->pre_hdr[0] != _VS_PIPE_MAGIC || !bytes) continue; // (the receive reports it)
        size_t sum = 0;
        int64_t nt = l->pre_hdr[4];
        if (nt < 0 || nt > p->maxnt || _VS_PIPE_HDR(nt) != l->pre_hn ||
            _vs_pipe_hdr_check(l->pre_hdr, (int)l->pre_hdr[3], (int)l->pre_hdr[1], (int)l->pre_hdr[2], (int)nt, &sum) !=
                VS_OK) {
            vs_clear_error();
            continue;
        }
        if (!(l->pre_buf = (char*)_vs_pipe_buf(p, bytes, 0))) continue;
        if (vs_recv(l->c, l->pre_buf, bytes, VS_U8, 0, &l->pre_bw) != VS_OK) {
            _vs_pipe_buf_free(p, l->pre_buf);
            l->pre_buf = NULL;
            l->pre_bw = NULL;
            vs_clear_error();
        }
    }
}

/* After a failed run: receives posted ahead are abandoned with their
   communicators (aborted: the pipe cannot run again; free it). */
_VS_PIPE_PRIVATE void _vs_pipe_drain(vs_pipe* p)
{
    for (int i = 0; i < p->nlinks; i++) {
        _vs_pipe_link* l = &p->links[i];
        if (l->pre_hw) vs_wait(l->pre_hw);
        if (l->pre_bw) vs_wait(l->pre_bw);
        if (l->pre_buf) _vs_pipe_buf_free(p, l->pre_buf);
        l->pre_hw = l->pre_bw = NULL;
        l->pre_buf = NULL;
        l->pre_hdone = 0;
        l->pre_err = VS_OK;
    }
}

_VS_PIPE_PRIVATE vs_result _vs_pipe_defer_loss(vs_pipe* p, int last, double* loss);

/* A failed run's end (r, with its message set): the other stages' waits ended
   too, and what this one posted: its links aborted (their operations for a
   peer that is gone would hold the streams until their deadline), receives
   posted ahead abandoned. Returns r with its message. */
_VS_PIPE_PRIVATE vs_result _vs_pipe_abandon(vs_pipe* p, vs_result r)
{
    char msg[1024]; // (the aborts below may set their own)
    size_t ml = strlen(vs_last_error());
    if (ml >= sizeof msg) ml = sizeof msg - 1;
    memcpy(msg, vs_last_error(), ml);
    msg[ml] = 0;
    /* this stage's own failure is the job's cause (an abort that reached it is not: NULL keeps that).
       Only the links this stage is on: another pair's has no communicator here, and its abort's
       "comm is NULL" would become this rank's last error, the cause the next abort tells every rank. */
    for (int i = 0; i < p->nlinks; i++)
        if (p->links[i].c) vs_comm_abort_with(p->links[i].c, r, NULL);
    _vs_pipe_drain(p);
    _vs_pipe_reap(p, 1);
    return vs_set_error(r, "%s", msg);
}

/* Schedule s is for p's plan and valid (checked once per handle and version:
   p->checked, which the caller may then set). */
_VS_PIPE_PRIVATE vs_result _vs_pipe_sched_fits(const vs_pipe* p, const vs_pipe_sched* s, const char* fn)
{
    const int K = p->plan.nchunks;
    if (s->stages != p->P || s->nchunks != K)
        return vs_set_error(VS_ERR_MISMATCH, "%s: the schedule has %d stages and %d chunks, the plan %d and %d", fn,
                            s->stages, s->nchunks, p->P, K);
    for (int k = 0; k < K; k++)
        if (s->chunk_stage[k] != p->plan.chunk_stage[k])
            return vs_set_error(VS_ERR_MISMATCH, "%s: the schedule puts chunk %d on stage %d, the plan on %d", fn, k,
                                s->chunk_stage[k], p->plan.chunk_stage[k]);
    if (p->checked != s || p->checked_ver != s->version) {
        vs_result r = vs_pipe_sched_check(s, NULL);
        if (r) return vs_set_error(r, "%s: %s", fn, vs_last_error());
    }
    return VS_OK;
}

VS_API vs_result vs_pipe_run(vs_pipe* p, const vs_pipe_sched* s, double* loss)
{
    _VS_TRY(_VS_PIPE_GONE("vs_pipe_run", p));
    _VS_TRY(_VS_SCHED_GONE("vs_pipe_run", s));
    if (!p || !s) return vs_set_error(VS_ERR_NULL, "vs_pipe_run: %s is NULL", p ? "schedule" : "pipe");
    const int K = p->plan.nchunks;
    _VS_TRY(_vs_pipe_sched_fits(p, s, "vs_pipe_run"));
    p->checked = s;
    p->checked_ver = s->version;
    _vs_pipe_clear(p);
    const int M = s->mbs, st = p->stage, n = s->len[st];
    p->M = M;
    p->slots = _VS_PIPE_NEW(p->w, _vs_pipe_slot, (size_t)M * (size_t)p->ntensors);
    p->saved = _VS_PIPE_NEW(p->w, void*, (size_t)p->desc.nunits * (size_t)M);
    p->saved_bytes = _VS_PIPE_NEW(p->w, size_t, (size_t)p->desc.nunits * (size_t)M);
    p->mb_loss = _VS_PIPE_NEW(p->w, float, M);
    p->pending = _VS_PIPE_NEW(p->w, int, (size_t)K * (size_t)M);
    if (n > p->tcap) {
        vs_free(p->w, p->t0);
        vs_free(p->w, p->t1);
        p->t0 = _VS_PIPE_NEW(p->w, double, n);
        p->t1 = _VS_PIPE_NEW(p->w, double, n);
        p->tcap = p->t0 && p->t1 ? n : 0;
    }
    const int last = p->plan.chunk_stage[K - 1] == st; // (it computes the losses)
    const int dl = p->dev && (last || p->desc.defer_loss); // (deferred: every stage gets them on the device)
    p->loss_pending = 0;
    if (dl) p->dlosses = (float*)_vs_pipe_buf(p, sizeof(float) * (size_t)M, 0);
    if (!p->slots || !p->saved || !p->saved_bytes || !p->mb_loss || !p->pending || (n && !p->tcap) ||
        (dl && !p->dlosses)) {
        _vs_pipe_clear(p);
        return vs_set_error(VS_ERR_NOMEM, "vs_pipe_run: out of memory for %d microbatches", M);
    }
    p->fwd = _vs_pipe_fwd_only(s, st); // (forward only: a chunk's microbatch goes after its F, and its SF)
    for (int k = 0; k < K; k++)
        for (int m = 0; m < M; m++)
            p->pending[k * M + m] = 1 + (p->fwd ? k + 1 < K && p->plan.chunk_stage[k + 1] != st
                                                : k > 0 && p->plan.chunk_stage[k - 1] != st);
    p->seed = p->desc.loss == VS_PIPE_LOSS_SUM ? 1.0f : 1.0f / (float)M;
    if (p->loss_scale != 1.0) p->seed = (float)((double)p->seed * p->loss_scale); // (1: the unscaled bits as before)
#ifdef _VS_PIPE_CUDA
    /* device: the seed kept in device memory, copied there when it changes (a
       pageable source: staged at the call), so a microbatch's seed is a device
       copy, not a host-to-device one */
    if (p->dev && (!p->dseed_set || memcmp(&p->dseed_val, &p->seed, sizeof p->seed))) {
        if (!p->dseed && !(p->dseed = (float*)vs_device_alloc(p->w, sizeof(float)))) {
            _vs_pipe_clear(p);
            return vs_set_error(VS_ERR_NOMEM, "vs_pipe_run: out of device memory for the loss gradient's seed");
        }
        cudaError_t se = cudaMemcpyAsync(p->dseed, &p->seed, sizeof p->seed, cudaMemcpyDefault, (cudaStream_t)p->stream);
        if (se != cudaSuccess) {
            _vs_pipe_clear(p);
            return _vs_pipe_cuerr(se, "the loss gradient's seed");
        }
        p->dseed_val = p->seed, p->dseed_set = 1;
    }
#endif
    vs_result r = VS_OK;
    double t_start = _vs_pipe_now();
    p->tn = 0;
    p->hook_wall = p->hook_cpu = 0;
    p->hook_seq = 0;
    p->cur_s = s;
    if (p->dev) r = _vs_pipe_peer_order(p, s);
    for (int i = 0; i < p->nlinks && !r; i++) r = _vs_pipe_prepost(p, s, &p->links[i], 0);
    if (r) r = vs_set_error(r, "vs_pipe_run: stage %d, before its first instruction: %s", st, vs_last_error());
    for (int i = 0; i < n && !r; i++) {
        const vs_pipe_instr* in = &s->ins[st][i];
        p->cur_pos = i;
        p->t0[i] = _vs_pipe_now() - t_start;
        if (in->op == VS_PIPE_SYNC || in->op == VS_PIPE_STEP) { // hooks: wall and on-CPU time (two clock reads each)
            double c0 = _vs_pipe_cpu_now();
            r = _vs_pipe_exec(p, s, in);
            p->hook_cpu += _vs_pipe_cpu_now() - c0;
            p->hook_wall += _vs_pipe_now() - t_start - p->t0[i];
        } else {
            r = _vs_pipe_exec(p, s, in);
        }
        if (!r) _vs_pipe_progress(p);
        p->t1[i] = _vs_pipe_now() - t_start;
        p->tn = i + 1;
        if (r) {
            char t[24], waits[48] = "";
            if (in->op == VS_PIPE_RECV_F || in->op == VS_PIPE_RECV_B)
                snprintf(waits, sizeof waits, " waiting for stage %d",
                         s->chunk_stage[in->op == VS_PIPE_RECV_F ? in->chunk - 1 : in->chunk + 1]);
            r = vs_set_error(r, "vs_pipe_run: stage %d at instruction %d (%s)%s: %s", st, i, _vs_pipe_itext(in, t),
                             waits, vs_last_error());
        } else if (p->nsends > 8 && !p->dev) // (device path: _vs_pipe_retire as the schedule proves them done)
            r = _vs_pipe_reap(p, 0);
    }
    p->cur_s = NULL;
    if (r) return _vs_pipe_abandon(p, r);
    // the sends: host path, the host waits; device path, the compute stream (their deadline: the watchdog's)
    vs_result r2 = p->dev ? _vs_pipe_retire(p, NULL, 0) : _vs_pipe_reap(p, 1);
    if (r2) return _vs_pipe_abandon(p, vs_set_error(r2, "vs_pipe_run: stage %d, a send: %s", st, vs_last_error()));
    /* The microbatch losses to the host. Device path with stages: the last
       stage broadcasts them from device memory into every stage's pinned
       memory, the broadcast ordered after each stage's compute stream (an
       event); each stage waits for it, the run's one host wait, which so
       covers all of the run's work on the compute stream, and sums them as
       the last stage would. One stage: a copy after the compute stream's
       work, then the wait. */
    if (p->dev && p->desc.defer_loss) return _vs_pipe_defer_loss(p, last, loss);
    if (p->dev && M > p->hloss_cap) { // the losses' pinned landing place
#ifdef _VS_PIPE_CUDA
        if (p->hloss) cudaFreeHost(p->hloss);
        p->hloss = NULL;
        p->hloss_cap = 0;
        cudaError_t e = cudaMallocHost((void**)&p->hloss, sizeof(float) * (size_t)M);
        if (e != cudaSuccess) r = _vs_pipe_cuerr(e, "pinned memory for the losses");
        else p->hloss_cap = M;
#endif
    }
    if (p->dev && p->pp) {
        vs_work* bw = NULL;
        const int root = p->plan.chunk_stage[K - 1];
        if (!r) r = _vs_pipe_fence_to(p, vs_comm_stream(p->pp));
        if (!r) r = vs_broadcast(p->pp, last ? p->dlosses : NULL, p->hloss, (size_t)M, VS_F32, root, &bw);
        if (!r) r = vs_wait(bw);
        if (!r) memcpy(p->mb_loss, p->hloss, sizeof(float) * (size_t)M);
        if (r) /* (the links' operations for a peer that never came still hold the streams: aborted too) */
            return _vs_pipe_abandon(p, vs_set_error(r, "vs_pipe_run: stage %d, sharing the losses: %s", st,
                                                    vs_last_error()));
    } else if (p->dev) {
        /* into pinned memory in stream order, then the wait with the deadline: a copy to pageable memory
           is itself a host wait for the stream, without one (a trainer's all-reduce on the compute stream
           whose peer never came held it for good) */
        int queued = 0;
        if (!r) r = _vs_pipe_copy(p, p->hloss, p->dlosses, sizeof(float) * (size_t)M), queued = !r;
        if (!r) r = _vs_pipe_wait(p, 0);
        if (!r) memcpy(p->mb_loss, p->hloss, sizeof(float) * (size_t)M);
        if (r && queued) /* the copy may still run once the stream is let go: its pinned memory is left to it */
            p->hloss = NULL, p->hloss_cap = 0;
        if (r) return vs_set_error(r, "vs_pipe_run: stage %d: %s", st, vs_last_error());
    }
    _vs_pipe_buf_free(p, p->dlosses);
    p->dlosses = NULL;
    double total = 0;
    if (last || p->dev)
        for (int m = 0; m < M; m++) total += (double)p->mb_loss[m];
    if (p->desc.loss != VS_PIPE_LOSS_SUM) total /= (double)M;
    if (p->pp && !p->dev) {
        r = vs_broadcast(p->pp, &total, &total, 1, VS_F64, p->plan.chunk_stage[K - 1], NULL);
        if (r) return vs_set_error(r, "vs_pipe_run: sharing the loss: %s", vs_last_error());
    }
    if (loss) *loss = total;
    p->last_loss = total;
    p->ran = 1;
    _vs_pipe_cache_trim(p);
    return VS_OK;
}

/* desc.defer_loss at a run's end: the last stage's losses broadcast into every
   stage's device copy, the compute stream waiting for it; no host wait and no
   copy to the host (vs_pipe_loss makes one when asked). */
_VS_PIPE_PRIVATE vs_result _vs_pipe_defer_loss(vs_pipe* p, int last, double* loss)
{
    vs_result r = VS_OK;
    (void)last;
#ifdef _VS_PIPE_CUDA
    const int K = p->plan.nchunks;
    if (p->pp) {
        vs_work* bw = NULL;
        r = _vs_pipe_fence_to(p, vs_comm_stream(p->pp));
        if (!r) r = vs_broadcast(p->pp, p->dlosses, p->dlosses, (size_t)p->M, VS_F32, p->plan.chunk_stage[K - 1], &bw);
        if (!r) r = vs_wait_stream(bw, p->stream);
    }
#endif
    if (r) return _vs_pipe_abandon(p, vs_set_error(r, "vs_pipe_run: stage %d, sharing the losses: %s", p->stage,
                                                   vs_last_error()));
    p->loss_pending = 1;
    if (loss) *loss = NAN;
    p->ran = 1;
    _vs_pipe_cache_trim(p);
    return VS_OK;
}

/* Deferred losses to the host, when asked: the compute stream waited for (with
   the mesh communicator's deadline), then their copy. */
_VS_PIPE_PRIVATE vs_result _vs_pipe_take_loss(vs_pipe* p, const char* fn)
{
    if (!p->loss_pending) return VS_OK;
    vs_result r = vs_sync_stream(vs_mesh_comm(p->desc.mesh), p->stream);
    if (!r) r = _vs_pipe_copy(p, p->mb_loss, p->dlosses, sizeof(float) * (size_t)p->M);
    if (!r) r = _vs_pipe_sync(p); // (a copy to pageable memory is done at its return; this only confirms it)
    if (r) return vs_set_error(r, "%s: the last run's losses: %s", fn, vs_last_error());
    double total = 0;
    for (int m = 0; m < p->M; m++) total += (double)p->mb_loss[m];
    if (p->desc.loss != VS_PIPE_LOSS_SUM) total /= (double)p->M;
    p->last_loss = total;
    p->loss_pending = 0;
    return VS_OK;
}

VS_API vs_result vs_pipe_loss(vs_pipe* p, double* loss)
{
    _VS_TRY(_VS_PIPE_GONE("vs_pipe_loss", p));
    if (!p || !loss) return vs_set_error(VS_ERR_NULL, "vs_pipe_loss: %s is NULL", p ? "loss" : "pipe");
    if (!p->ran) return vs_set_error(VS_ERR_STATE, "vs_pipe_loss: no completed run");
    _VS_TRY(_vs_pipe_take_loss(p, "vs_pipe_loss"));
    *loss = p->last_loss;
    return VS_OK;
}

VS_API vs_result vs_pipe_loss_device(const vs_pipe* p, const float** losses, int* m)
{
    _VS_TRY(_VS_PIPE_GONE("vs_pipe_loss_device", p));
    if (!p || !losses || !m)
        return vs_set_error(VS_ERR_NULL, "vs_pipe_loss_device: %s is NULL", !p ? "pipe" : !losses ? "losses" : "m");
    if (!p->ran || !p->dev || !p->desc.defer_loss || !p->dlosses)
        return vs_set_error(VS_ERR_STATE, "vs_pipe_loss_device: no run with desc.defer_loss on device buffers");
    *losses = p->dlosses;
    *m = p->M;
    return VS_OK;
}

VS_API vs_result vs_pipe_set_loss_scale(vs_pipe* p, double scale)
{
    _VS_TRY(_VS_PIPE_GONE("vs_pipe_set_loss_scale", p));
    if (!p) return vs_set_error(VS_ERR_NULL, "vs_pipe_set_loss_scale: pipe is NULL");
    if (!(scale > 0) || !isfinite(scale))
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_set_loss_scale: scale %g must be finite and > 0", scale);
    p->loss_scale = scale;
    return VS_OK;
}

/* Adds one event to vs_pipe_hook_order's list. */
_VS_PIPE_PRIVATE void _vs_pipe_order_add(const vs_pipe* p, int u, int mb, int M, int what, int fwd, int instr,
                                         vs_pipe_hook_event* out, size_t cap, size_t* n)
{
    const int pt = _vs_pipe_hook_part(&p->desc.units[u], what);
    for (int after = 0; pt && after < 2; after++, ++*n)
        if (*n < cap) {
            _vs_pipe_hook_fill(p, u, mb, M, what, pt + after, fwd, &out[*n]);
            out[*n].instr = instr;
            out[*n].seq = (int64_t)*n;
        }
}

/* The parts _vs_pipe_exec runs, in its order: F the chunk's units first to
   last; B and BW last to first, a recomputed forward before each such unit's
   backward; W last to first. */
VS_API vs_result vs_pipe_hook_order(const vs_pipe* p, const vs_pipe_sched* s, vs_pipe_hook_event* out, size_t cap,
                                    size_t* n)
{
    _VS_TRY(_VS_PIPE_GONE("vs_pipe_hook_order", p));
    _VS_TRY(_VS_SCHED_GONE("vs_pipe_hook_order", s));
    if (!p || !s || !n || (!out && cap))
        return vs_set_error(VS_ERR_NULL, "vs_pipe_hook_order: %s is NULL",
                            !p ? "pipe" : !s ? "schedule" : !n ? "n" : "out (with cap > 0)");
    *n = 0;
    _VS_TRY(_vs_pipe_sched_fits(p, s, "vs_pipe_hook_order"));
    const int st = p->stage, M = s->mbs, fwd = _vs_pipe_fwd_only(s, st);
    for (int i = 0; i < s->len[st]; i++) {
        const vs_pipe_instr* in = &s->ins[st][i];
        const int op = in->op, comp = op == VS_PIPE_F || op == VS_PIPE_B || op == VS_PIPE_BW || op == VS_PIPE_W;
        const int lo = comp ? p->plan.first_unit[in->chunk] : 0, hi = comp ? p->plan.first_unit[in->chunk + 1] : 0;
        if (op == VS_PIPE_F)
            for (int u = lo; u < hi; u++) _vs_pipe_order_add(p, u, in->mb, M, _VS_PIPE_CALL_F, fwd, i, out, cap, n);
        else if (comp)
            for (int u = hi - 1; u >= lo; u--) {
                if (op != VS_PIPE_W && p->desc.units[u].recompute)
                    _vs_pipe_order_add(p, u, in->mb, M, _VS_PIPE_CALL_RF, fwd, i, out, cap, n);
                const int w = op == VS_PIPE_B ? _VS_PIPE_CALL_B : op == VS_PIPE_W ? _VS_PIPE_CALL_W : _VS_PIPE_CALL_BW;
                _vs_pipe_order_add(p, u, in->mb, M, w, fwd, i, out, cap, n);
            }
    }
    return VS_OK;
}

VS_API vs_result vs_pipe_mb_loss(const vs_pipe* p, int mb, double* loss)
{
    _VS_TRY(_VS_PIPE_GONE("vs_pipe_mb_loss", p));
    if (!p || !loss) return vs_set_error(VS_ERR_NULL, "vs_pipe_mb_loss: %s is NULL", p ? "loss" : "pipe");
    if (!p->ran) return vs_set_error(VS_ERR_STATE, "vs_pipe_mb_loss: no completed run");
    if (p->plan.chunk_stage[p->plan.nchunks - 1] != p->stage)
        return vs_set_error(VS_ERR_STATE, "vs_pipe_mb_loss: stage %d does not hold the last chunk (stage %d does)",
                            p->stage, p->plan.chunk_stage[p->plan.nchunks - 1]);
    if (mb < 0 || mb >= p->M) return vs_set_error(VS_ERR_INVALID, "vs_pipe_mb_loss: microbatch %d (0..%d)", mb, p->M - 1);
    _VS_TRY(_vs_pipe_take_loss((vs_pipe*)p, "vs_pipe_mb_loss"));
    *loss = (double)p->mb_loss[mb];
    return VS_OK;
}

VS_API vs_result vs_pipe_mb_output(const vs_pipe* p, int mb, int i, vs_pipe_tensor* out)
{
    _VS_TRY(_VS_PIPE_GONE("vs_pipe_mb_output", p));
    if (!p || !out) return vs_set_error(VS_ERR_NULL, "vs_pipe_mb_output: %s is NULL", p ? "out" : "pipe");
    double l;
    _VS_TRY(vs_pipe_mb_loss(p, mb, &l));
    const _vs_pipe_uinfo* last = &p->u[p->desc.nunits - 1];
    if (i < 0 || i >= last->nout)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_mb_output: output %d (the last unit has %d)", i, last->nout);
    int id = last->out[i];
    _vs_pipe_view(p, id, &p->slots[(size_t)mb * (size_t)p->ntensors + (size_t)id], out);
    out->grad = NULL;
    return VS_OK;
}

VS_API vs_result vs_pipe_last_timeline(const vs_pipe* p, const double** t0, const double** t1, int* n)
{
    _VS_TRY(_VS_PIPE_GONE("vs_pipe_last_timeline", p));
    if (!p || !t0 || !t1 || !n)
        return vs_set_error(VS_ERR_NULL, "vs_pipe_last_timeline: %s is NULL", !p ? "pipe" : !t0 ? "t0" : !t1 ? "t1" : "n");
    *t0 = p->t0;
    *t1 = p->t1;
    *n = p->tn;
    return VS_OK;
}

VS_API vs_result vs_pipe_gather_timelines(vs_pipe* p, const double* const** t0, const double* const** t1,
                                          const int** n)
{
    const char* fn = "vs_pipe_gather_timelines";
    _VS_TRY(_VS_PIPE_GONE(fn, p));
    if (!p || !t0 || !t1 || !n) return vs_set_error(VS_ERR_NULL, "%s: an argument is NULL", fn);
    const int P = p->plan.stages;
    vs_free(p->w, p->all_t);
    vs_free(p->w, (void*)p->all_t0);
    vs_free(p->w, (void*)p->all_t1);
    vs_free(p->w, p->all_n);
    p->all_t = NULL, p->all_t0 = p->all_t1 = NULL, p->all_n = NULL;
    /* The longest list first (every stage's block is that long), then one
       all-gather of [n, t0..., t1...] per stage; through engine memory, which is
       device memory on NCCL. */
    double mx = p->tn;
    size_t blk = 0;
    double* dev = NULL;
    vs_result r = VS_OK;
    if (p->pp) {
        double* d = (double*)_vs_pipe_buf(p, sizeof(double), 0);
        r = d ? _vs_pipe_copy(p, d, &mx, sizeof mx) : vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
        if (!r) r = vs_all_reduce(p->pp, d, d, 1, VS_F64, VS_OP_MAX, NULL);
        if (!r) r = _vs_pipe_copy(p, &mx, d, sizeof mx);
        if (!r) r = _vs_pipe_sync(p);
        if (d) _vs_pipe_buf_free(p, d);
    }
    blk = 1 + 2 * (size_t)mx;
    double* mine = r ? NULL : _VS_PIPE_NEW(p->w, double, blk);
    p->all_t = r ? NULL : _VS_PIPE_NEW(p->w, double, blk * (size_t)P);
    p->all_t0 = (const double**)_VS_PIPE_NEW(p->w, const double*, P);
    p->all_t1 = (const double**)_VS_PIPE_NEW(p->w, const double*, P);
    p->all_n = _VS_PIPE_NEW(p->w, int, P);
    if (!r && (!mine || !p->all_t || !p->all_t0 || !p->all_t1 || !p->all_n))
        r = vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
    if (!r) {
        mine[0] = p->tn;
        for (int i = 0; i < p->tn; i++) mine[1 + i] = p->t0[i], mine[1 + (size_t)mx + i] = p->t1[i];
        if (!p->pp) memcpy(p->all_t, mine, sizeof(double) * blk);
        else if (vs_comm_rank(p->pp) != p->stage)
            r = vs_set_error(VS_ERR_STATE, "%s: PP rank %d holds stage %d", fn, vs_comm_rank(p->pp), p->stage);
        else {
            dev = (double*)_vs_pipe_buf(p, sizeof(double) * blk * (size_t)(P + 1), 0);
            r = dev ? _vs_pipe_copy(p, dev + blk * (size_t)P, mine, sizeof(double) * blk)
                    : vs_set_error(VS_ERR_NOMEM, "%s: out of memory", fn);
            if (!r) r = vs_all_gather(p->pp, dev + blk * (size_t)P, dev, blk, VS_F64, NULL);
            if (!r) r = _vs_pipe_copy(p, p->all_t, dev, sizeof(double) * blk * (size_t)P);
            if (!r) r = _vs_pipe_sync(p);
        }
    }
    if (dev) _vs_pipe_buf_free(p, dev);
    vs_free(p->w, mine);
    for (int s = 0; !r && s < P; s++) {
        const double* b = p->all_t + blk * (size_t)s;
        p->all_n[s] = (int)b[0];
        p->all_t0[s] = b + 1;
        p->all_t1[s] = b + 1 + (size_t)mx;
    }
    if (r) return vs_set_error(r, "%s: %s", fn, vs_last_error());
    *t0 = p->all_t0;
    *t1 = p->all_t1;
    *n = p->all_n;
    return VS_OK;
}

VS_API vs_result vs_pipe_last_memory(const vs_pipe* p, size_t* peak)
{
    _VS_TRY(_VS_PIPE_GONE("vs_pipe_last_memory", p));
    if (!p || !peak) return vs_set_error(VS_ERR_NULL, "vs_pipe_last_memory: %s is NULL", p ? "peak" : "pipe");
    *peak = p->last_peak;
    return VS_OK;
}

VS_API vs_result vs_pipe_last_hooks(const vs_pipe* p, double* wall, double* cpu)
{
    _VS_TRY(_VS_PIPE_GONE("vs_pipe_last_hooks", p));
    if (!p) return vs_set_error(VS_ERR_NULL, "vs_pipe_last_hooks: pipe is NULL");
    if (wall) *wall = p->hook_wall;
    if (cpu) *cpu = p->hook_cpu;
    return VS_OK;
}

_VS_PIPE_PRIVATE void _vs_pipe_add(void* acc, const void* other, size_t count, vs_dtype dt, int other_first)
{
    for (size_t i = 0; i < count; i++) {
        if (dt == VS_F32) {
            float a = ((float*)acc)[i], b = ((const float*)other)[i];
            ((float*)acc)[i] = other_first ? b + a : a + b;
        } else if (dt == VS_F64) {
            double a = ((double*)acc)[i], b = ((const double*)other)[i];
            ((double*)acc)[i] = other_first ? b + a : a + b;
        } else if (dt == VS_F16) {
            float a = vs_f16_to_f32(((uint16_t*)acc)[i]), b = vs_f16_to_f32(((const uint16_t*)other)[i]);
            ((uint16_t*)acc)[i] = vs_f32_to_f16(other_first ? b + a : a + b);
        } else {
            float a = vs_bf16_to_f32(((uint16_t*)acc)[i]), b = vs_bf16_to_f32(((const uint16_t*)other)[i]);
            ((uint16_t*)acc)[i] = vs_f32_to_bf16(other_first ? b + a : a + b);
        }
    }
}

VS_API vs_result vs_pipe_tie_grads(vs_pipe* p, int chunk_a, int chunk_b, void* grad, size_t count, vs_dtype dt)
{
    _VS_TRY(_VS_PIPE_GONE("vs_pipe_tie_grads", p));
    if (!p) return vs_set_error(VS_ERR_NULL, "vs_pipe_tie_grads: pipe is NULL");
    const int K = p->plan.nchunks;
    if (chunk_a < 0 || chunk_a >= K || chunk_b < 0 || chunk_b >= K || chunk_a == chunk_b)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_tie_grads: chunks %d and %d (two of 0..%d)", chunk_a, chunk_b, K - 1);
    if (dt != VS_F32 && dt != VS_F64 && dt != VS_BF16 && dt != VS_F16)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_tie_grads: dtype %s (f32, f64, bf16 or f16)", vs_dtype_name(dt));
    int sa = p->plan.chunk_stage[chunk_a], sb = p->plan.chunk_stage[chunk_b];
    if (sa == sb || (p->stage != sa && p->stage != sb)) return VS_OK; // one stage: its units share the buffer
    if (count && !grad) return vs_set_error(VS_ERR_NULL, "vs_pipe_tie_grads: grad is NULL for %zu elements", count);
    if (count > SIZE_MAX / vs_dtype_size(dt))
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_tie_grads: count %zu of %s overflows the byte count", count,
                            vs_dtype_name(dt));
    size_t bytes = count * vs_dtype_size(dt);
    /* The peer's part lands in engine memory. The sum is made on the host: on the
       device path (grad is then device memory) in host copies of both parts. */
    void* other = _vs_pipe_buf(p, bytes, 0);
    char* host = p->dev ? (char*)_vs_pipe_new(p->w, 2, bytes) : NULL;
    void* acc = host ? (void*)host : grad;
    void* oth = host ? (void*)(host + bytes) : other;
    int peer = p->stage == sa ? sb : sa;
    vs_result r = !other || (p->dev && !host) ? vs_set_error(VS_ERR_NOMEM, "%zu bytes", bytes) : VS_OK;
    if (!r) r = _vs_pipe_sync(p); // the trainer's gradient, final on the compute stream
    if (!r) r = vs_group_start(p->pp);
    if (!r) {
        r = vs_send(p->pp, grad, count, dt, peer, NULL);
        if (!r) r = vs_recv(p->pp, other, count, dt, peer, NULL);
        vs_result r2 = vs_group_end(p->pp, NULL);
        if (!r) r = r2;
    }
    if (!r) r = _vs_pipe_copy(p, acc, grad, bytes);
    if (!r) r = _vs_pipe_copy(p, oth, other, bytes);
    if (!r) r = _vs_pipe_sync(p);
    // the lower chunk's part first on both stages, so both get the same bits
    int mine_first = (p->stage == sa) == (chunk_a < chunk_b);
    if (!r) _vs_pipe_add(acc, oth, count, dt, !mine_first);
    if (!r) r = _vs_pipe_copy(p, grad, acc, bytes);
    if (!r) r = _vs_pipe_sync(p); // (before `host` goes)
    if (other) _vs_pipe_buf_free(p, other);
    vs_free(p->w, host);
    return r ? vs_set_error(r, "vs_pipe_tie_grads: %s", vs_last_error()) : VS_OK;
}

/* The callbacks' helpers (vs_pipe_output, vs_pipe_save of >>pipe-model): here,
   after the engine's state they fill in. */

_VS_PIPE_PRIVATE vs_result _vs_pipe_output(vs_pipe_call* call, int i, vs_dtype dt, int ndim, const int64_t* shape,
                                           void** data)
{
    if (!call || !data) return vs_set_error(VS_ERR_NULL, "vs_pipe_output: %s is NULL", call ? "data" : "call");
    *data = NULL;
    struct _vs_pipe_rt* rt = call->_rt;
    if (!rt) return vs_set_error(VS_ERR_STATE, "vs_pipe_output: not inside an engine callback");
    vs_pipe* p = rt->p;
    const char* who = rt->unit >= 0 ? p->desc.units[rt->unit].name : "data callback";
    if (i < 0 || i >= call->n_out)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_output: %s: output %d (0..%d)", who, i, call->n_out - 1);
    if (vs_dtype_size(dt) == 0) return vs_set_error(VS_ERR_INVALID, "vs_pipe_output: %s: dtype %d", who, (int)dt);
    if (ndim < 0 || ndim > VS_PIPE_MAX_DIMS || (ndim && !shape))
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_output: %s: ndim %d (0..%d, shape given)", who, ndim,
                            VS_PIPE_MAX_DIMS);
    size_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0 || (shape[d] && n > SIZE_MAX / 16 / (size_t)shape[d]))
            return vs_set_error(VS_ERR_INVALID, "vs_pipe_output: %s: shape[%d] = %lld", who, d, (long long)shape[d]);
        n *= (size_t)shape[d];
    }
    int id = rt->out_ids[i];
    if (!_vs_pipe_spec_fits(&rt->out_spec[i], dt, ndim, shape)) {
        char a[160], g[160];
        return vs_set_error(VS_ERR_MISMATCH, "vs_pipe_output: %s: output \"%s\" got %s, spec %s", who, p->t[id].name,
                            _vs_pipe_shape_text(dt, ndim, shape, g, sizeof g),
                            _vs_pipe_spec_text(p->t[id].name, &rt->out_spec[i], a, sizeof a));
    }
    _vs_pipe_slot* s = &p->slots[(size_t)rt->mb * (size_t)p->ntensors + (size_t)id];
    if (s->data && rt->again) { // a recompute: the first forward's buffer, of the same shape
        int same = s->dt == dt && s->ndim == ndim;
        for (int d = 0; d < ndim && same; d++) same = s->shape[d] == shape[d];
        if (!same)
            return vs_set_error(VS_ERR_MISMATCH, "vs_pipe_output: %s: output \"%s\" recomputed with another shape or "
                                "dtype than its first forward's (vs_pipe_unit.recompute needs a deterministic forward)",
                                who, p->t[id].name);
        call->out[i].dtype = dt;
        call->out[i].ndim = ndim;
        for (int d = 0; d < ndim; d++) call->out[i].shape[d] = shape[d];
        call->out[i].data = *data = s->data;
        return VS_OK;
    }
    if (s->data) return vs_set_error(VS_ERR_STATE, "vs_pipe_output: %s made \"%s\" twice", who, p->t[id].name);
    s->dt = dt;
    s->ndim = ndim;
    for (int d = 0; d < ndim; d++) s->shape[d] = shape[d];
    s->bytes = n * vs_dtype_size(dt);
    s->data = _vs_pipe_buf(p, s->bytes, 1);
    if (!s->data) return vs_set_error(VS_ERR_NOMEM, "vs_pipe_output: %zu bytes for \"%s\"", s->bytes, p->t[id].name);
    call->out[i].dtype = dt;
    call->out[i].ndim = ndim;
    for (int d = 0; d < ndim; d++) call->out[i].shape[d] = shape[d];
    call->out[i].data = s->data;
    *data = s->data;
    return VS_OK;
}

_VS_PIPE_PRIVATE vs_result _vs_pipe_save(vs_pipe_call* call, size_t bytes, void** data)
{
    if (!call || !data) return vs_set_error(VS_ERR_NULL, "vs_pipe_save: %s is NULL", call ? "data" : "call");
    *data = NULL;
    struct _vs_pipe_rt* rt = call->_rt;
    if (!rt || rt->unit < 0) return vs_set_error(VS_ERR_STATE, "vs_pipe_save: only inside a unit's forward");
    vs_pipe* p = rt->p;
    size_t at = (size_t)rt->unit * (size_t)p->M + (size_t)rt->mb;
    if (p->saved[at]) return vs_set_error(VS_ERR_STATE, "vs_pipe_save: unit \"%s\" saved twice", p->desc.units[rt->unit].name);
    p->saved[at] = _vs_pipe_buf(p, bytes, 1);
    if (!p->saved[at]) return vs_set_error(VS_ERR_NOMEM, "vs_pipe_save: %zu bytes", bytes);
    p->saved_bytes[at] = bytes;
    call->saved = *data = p->saved[at];
    call->saved_bytes = bytes;
    return VS_OK;
}


#ifdef __cplusplus
}
#endif
#endif // VESCALE_PIPE_IMPLEMENTATION

/* vescale_pipe.h - MIT License

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
