/* vescale_pipe.h - v0.1.0 (2026-11-23) - pipeline stages, schedules as instruction lists (GPipe, 1F1B, interleaved, zero bubble) and the engine that runs them.

   Status: skeleton. This header compiles and links so trainers can include it;
   its API arrives with its own issue. Everything it builds on is in
   vescale_mesh.h, which it includes.

   Do this in *one* C or C++ file:
       #define VESCALE_IMPLEMENTATION        (every part), or
       #define VESCALE_PIPE_IMPLEMENTATION   (this part only; the mesh
                                              implementation must then be
                                              enabled somewhere as well)
       #include "vescale_pipe.h"
   (VESCALE_STATIC, see vescale_mesh.h, implies the implementation.)

   Platforms and link lines: as vescale_mesh.h (POSIX.1-2008 + pthreads;
   -lpthread -lm). MIT license (end of file).
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

/* The VESCALE_VERSION_NUMBER this part was built with (catches a part compiled
   from a different release than vescale_mesh.h). */
VS_API int vs_pipe_version(void);

// >>pipe-model -----------------------------------------------------------------

#define VS_PIPE_MAX_DIMS 8     // dims of a tensor that crosses a unit boundary
#define VS_PIPE_MAX_IO 16      // named tensors a unit takes, and that it returns
#define VS_PIPE_MAX_CHUNKS 256 // stages x virtual chunks
#define VS_PIPE_NAME_MAX 64    // bytes of a unit or tensor name, with the NUL

/* A named tensor as a unit sees it. Activations are the engine's memory (host on
   threads and MPI, device on NCCL); parameters stay the trainer's own. */
typedef struct vs_pipe_tensor {
    const char* name;
    vs_dtype dtype;
    int ndim;
    int64_t shape[VS_PIPE_MAX_DIMS];
    void* data; // the values
    void* grad; // backward only: the gradient, same shape and dtype, zeroed by the engine
} vs_pipe_tensor;

struct _vs_pipe_rt;

/* What a callback gets. in[i] follows the unit's `inputs` list, out[i] its
   `outputs` list.
   forward:  reads in[].data, makes each output with vs_pipe_output (which sets its
             shape) and writes it; may keep scratch for backward with vs_pipe_save.
   backward: in[].data and out[].data are as forward left them; out[].grad holds the
             gradient of the loss with respect to each output; the callback ADDS
             (+=) the input gradients into in[].grad (zeroed by the engine, so a
             tensor used by several units sums their parts, latest unit first, as
             one device's reverse pass does) and adds parameter gradients into its
             own buffers. backward_input does only the first part, backward_weight
             only the second. */
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
} vs_pipe_call;

typedef vs_result (*vs_pipe_fn)(vs_pipe_call* call);

/* In forward (or the data callback): allocates output i with this dtype and shape
   (ndim 0: a scalar) and returns its memory in *data (also in call->out[i].data). */
VS_API vs_result vs_pipe_output(vs_pipe_call* call, int i, vs_dtype dt, int ndim,
                                const int64_t* shape, void** data);
/* In forward: scratch of `bytes` kept for this unit and microbatch until its last
   backward part (W, or the full backward) has run. */
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
    const char* points;          // manual: the P*V-1 units that start a chunk, "l4,l8,l12"
    vs_pipe_placement placement;
} vs_pipe_split_desc;

/* Where the model is cut: chunk k (pipeline order) holds units
   [first_unit[k], first_unit[k+1]) and runs on stage chunk_stage[k]. */
typedef struct vs_pipe_plan {
    int stages, chunks, nchunks, nunits; // nchunks = stages * chunks
    vs_pipe_split_kind kind;
    vs_pipe_placement placement;
    int first_unit[VS_PIPE_MAX_CHUNKS + 1];
    int chunk_stage[VS_PIPE_MAX_CHUNKS];
    double cost[VS_PIPE_MAX_CHUNKS]; // each chunk's cost under the split's measure
} vs_pipe_plan;

/* Splits the units into stages x chunks. Balanced kinds minimise the largest
   chunk cost (every unit counts, embedding and loss included) and never cut
   inside a group. Bad input (more chunks than units, unknown or out-of-order split
   points, ...) is VS_ERR_INVALID naming it. */
VS_API vs_result vs_pipe_split(const vs_pipe_unit* units, int nunits,
                               const vs_pipe_split_desc* desc, vs_pipe_plan* out);
/* A readable plan: one line per stage and chunk with its units and costs. Returns
   the length it needs (snprintf-like); buf may be NULL when cap is 0. */
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
   chunk_stage[k]; NULL: k % stages) and M microbatches. Allocation through
   vs_alloc(world) (world may be NULL: the C allocator). */
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
   (snprintf-like); parse errors name the line and the token. */
VS_API int vs_pipe_sched_print(const vs_pipe_sched* s, char* buf, size_t cap);
VS_API vs_result vs_pipe_sched_parse(const vs_world* world, const char* text, vs_pipe_sched** out);

/* Inserts the sends and receives that a schedule of compute instructions (F, B,
   W, BW, SYNC, STEP) needs: each send right after its producer, each receive
   before its consumer and in the order the peer sends (so it never deadlocks
   when the compute order is feasible). A schedule that already has sends and
   receives is left as it is. */
VS_API vs_result vs_pipe_sched_add_comm(vs_pipe_sched* s);

typedef struct vs_pipe_check_desc {
    int64_t max_live_activations; // per stage: (chunk, mb) forwards held at once; 0: no bound
} vs_pipe_check_desc;

/* Validates a schedule (desc may be NULL):
   - every (chunk, mb) runs F, then B then W (or BW) once each, on its stage;
   - dependencies: F(c,m) after F(c-1,m); B(c,m) after B(c+1,m) (last chunk:
     after its own F); W after B; the data crosses stages by a send and a receive;
   - each chunk's parameter gradients accumulate in microbatch order (B/BW and W
     in increasing mb per chunk), so results equal one device bit for bit;
   - sends match receives in order between every pair of stages;
   - no cycle of waits (the lists are simulated; sends never block);
   - SYNC<c> after chunk c's last backward; STEP last;
   - the activation bound, when given.
   A broken rule is VS_ERR_INVALID naming the stage, the position, the rule and
   the instructions around it. */
VS_API vs_result vs_pipe_sched_check(const vs_pipe_sched* s, const vs_pipe_check_desc* desc);

// >>pipe-gen -------------------------------------------------------------------

typedef enum vs_pipe_kind {
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
   (0: the kind's own: 1, or 2 for ZB-V and DualPipeV) and any M >= 1, with its
   sends and receives, SYNC hooks and STEP; it passes vs_pipe_sched_check. Where
   the ideal pattern needs more microbatches it degrades to a correct one. */
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
   starts when its stage is free and its inputs have arrived. */
VS_API vs_result vs_pipe_simulate(const vs_pipe_sched* s, const vs_pipe_costs* costs,
                                  vs_pipe_sim* out);
/* A text timeline, one row per stage, one column per time slot of `slot` seconds
   (0: the shortest instruction), with a legend. Returns the length it needs
   (snprintf-like; buf may be NULL when cap is 0), -1 on error (vs_last_error). */
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
} vs_pipe_desc;

/* Collective over the mesh. Checks the plan against the units and the mesh (its
   stage count must equal the PP dim), and the tensor specs between producer and
   consumer (dtype and fixed dims must agree). */
VS_API vs_result vs_pipe_init(const vs_pipe_desc* desc, vs_pipe** out);
/* Runs one minibatch through the schedule (validated first, once per schedule
   handle). *loss (may be NULL) gets the minibatch loss on every stage. */
VS_API vs_result vs_pipe_run(vs_pipe* p, const vs_pipe_sched* s, double* loss);
/* Microbatch mb's loss and output tensor i of the last unit, from the last run;
   on the stage that holds the last chunk (VS_ERR_STATE elsewhere). */
VS_API vs_result vs_pipe_mb_loss(const vs_pipe* p, int mb, double* loss);
VS_API vs_result vs_pipe_mb_output(const vs_pipe* p, int mb, int i, vs_pipe_tensor* out);
/* The stage (PP coordinate) of this rank. */
VS_API int vs_pipe_stage(const vs_pipe* p);
/* The last run's timeline on this stage: *n instructions, start and end seconds
   (from the run's start) in t0/t1 (valid until the next run). */
VS_API vs_result vs_pipe_last_timeline(const vs_pipe* p, const double** t0, const double** t1,
                                       int* n);
/* Sums a buffer of a tied parameter's gradient (e.g. the embedding and the LM
   head) between the stages of chunks a and b, in chunk order so both get the
   same bits. Collective between the two stages. */
VS_API vs_result vs_pipe_tie_grads(vs_pipe* p, int chunk_a, int chunk_b, void* grad,
                                   size_t count, vs_dtype dt);
VS_API vs_result vs_pipe_free(vs_pipe* p);

#ifdef __cplusplus
}
#endif
#endif // VESCALE_PIPE_INCLUDED

#if defined(VESCALE_PIPE_IMPLEMENTATION) && !defined(VESCALE_PIPE_IMPLEMENTED)
#define VESCALE_PIPE_IMPLEMENTED
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __cplusplus
extern "C" {
#endif

#define _VS_PIPE_PRIVATE static _VS_UNUSED

VS_API int vs_pipe_version(void) { return VESCALE_VERSION_NUMBER; }

// >>pipe-model -----------------------------------------------------------------

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

// >>pipe-split -----------------------------------------------------------------
/* (split: filled in by its own change) */
VS_API vs_result vs_pipe_split(const vs_pipe_unit* units, int nunits, const vs_pipe_split_desc* desc,
                               vs_pipe_plan* out)
{
    (void)units, (void)nunits, (void)desc, (void)out;
    return vs_set_error(VS_ERR_UNSUPPORTED, "vs_pipe_split: not yet");
}

VS_API int vs_pipe_plan_print(const vs_pipe_plan* p, const vs_pipe_unit* units, char* buf, size_t cap)
{
    (void)p, (void)units, (void)buf, (void)cap;
    return 0;
}
// >>pipe-split end

// >>pipe-sched -----------------------------------------------------------------

struct vs_pipe_sched {
    const vs_world* world;
    int stages, nchunks, mbs;
    int chunk_stage[VS_PIPE_MAX_CHUNKS];
    int len[VS_PIPE_MAX_CHUNKS], cap[VS_PIPE_MAX_CHUNKS];
    vs_pipe_instr* ins[VS_PIPE_MAX_CHUNKS];
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
    if (mbs < 1) return vs_set_error(VS_ERR_INVALID, "vs_pipe_sched_new: microbatch count %d (at least 1)", mbs);
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
    vs_pipe_instr* i = &s->ins[stage][s->len[stage]++];
    i->op = (int)op;
    i->chunk = chunk;
    i->mb = mb;
    return VS_OK;
}

VS_API int vs_pipe_sched_stages(const vs_pipe_sched* s) { return s ? s->stages : 0; }
VS_API int vs_pipe_sched_nchunks(const vs_pipe_sched* s) { return s ? s->nchunks : 0; }
VS_API int vs_pipe_sched_mbs(const vs_pipe_sched* s) { return s ? s->mbs : 0; }
VS_API int vs_pipe_sched_chunk_stage(const vs_pipe_sched* s, int chunk)
{
    return s && chunk >= 0 && chunk < s->nchunks ? s->chunk_stage[chunk] : -1;
}
VS_API int vs_pipe_sched_len(const vs_pipe_sched* s, int stage)
{
    return s && stage >= 0 && stage < s->stages ? s->len[stage] : 0;
}

VS_API vs_result vs_pipe_sched_at(const vs_pipe_sched* s, int stage, int i, vs_pipe_instr* out)
{
    if (!s || !out) return vs_set_error(VS_ERR_NULL, "vs_pipe_sched_at: %s is NULL", s ? "out" : "schedule");
    if (stage < 0 || stage >= s->stages)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_sched_at: stage %d (0..%d)", stage, s->stages - 1);
    if (i < 0 || i >= s->len[stage])
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_sched_at: position %d on stage %d (0..%d)", i, stage,
                            s->len[stage] - 1);
    *out = s->ins[stage][i];
    return VS_OK;
}

VS_API vs_result vs_pipe_sched_free(vs_pipe_sched* s)
{
    if (!s) return VS_OK;
    for (int st = 0; st < s->stages; st++) vs_free(s->world, s->ins[st]);
    vs_free(s->world, s);
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

VS_API int vs_pipe_sched_print(const vs_pipe_sched* s, char* buf, size_t cap)
{
    size_t len = 0;
    if (buf && cap) buf[0] = 0;
    if (!s) return 0;
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
            int used = 0;
            if (sscanf(q, "pipe stages=%d chunks=%d mbs=%d place=%n", &stages, &nchunks, &mbs, &used) != 3 || !used) {
                r = vs_set_error(VS_ERR_INVALID,
                                 "vs_pipe_sched_parse: line %d: expected \"pipe stages=P chunks=K mbs=M place=s0,s1,...\"",
                                 line);
                goto fail;
            }
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
            r = vs_set_error(VS_ERR_INVALID, "vs_pipe_sched_parse: line %d: expected \"<stage 0..%d>: ...\"", line,
                             stages - 1);
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
    vs_pipe_sched_free(s);
    return r;
}

/* The message that instruction (op, c, m) sends or receives, as the sender names
   it: kind 0 activations of chunk x, kind 1 input gradients of chunk x. */
typedef struct _vs_pipe_msg {
    int kind, chunk, mb;
} _vs_pipe_msg;

VS_API vs_result vs_pipe_sched_add_comm(vs_pipe_sched* s)
{
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

VS_API vs_result vs_pipe_sched_check(const vs_pipe_sched* s, const vs_pipe_check_desc* d)
{
    if (!s) return vs_set_error(VS_ERR_NULL, "vs_pipe_sched_check: schedule is NULL");
    const int P = s->stages, K = s->nchunks, M = s->mbs;
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
            const char* miss = !(dn & _VS_VF) ? "F" : !(dn & _VS_VB) ? "B (or BW)" : !(dn & _VS_VW) ? "W" : NULL;
            if (!miss && k + 1 < K && s->chunk_stage[k + 1] != s->chunk_stage[k] && !(dn & _VS_VSF)) miss = "SF";
            if (!miss && k > 0 && s->chunk_stage[k - 1] != s->chunk_stage[k] && !(dn & _VS_VSB)) miss = "SB";
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

// >>pipe-sched end

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
     GPipe        every forward, then the backwards;
     1F1B, interleaved  the next backward of the stage's backward order when it
                  is ready, else the next forward of its forward order while
                  fewer than `limit` activations are held (1F1B: P - p; the
                  interleaved order is Megatron's: microbatches in groups of
                  P, chunk after chunk within a group, the last group smaller;
                  limit 2(P-p-1) + (V-1)P + 1);
     ZB-H1        B first, else F under 1F1B's limit (an activation is held
                  until its W), else a deferred W: the W fill the bubbles;
     ZB-V         the same on two chunks per stage (V placement), F of the
                  later chunk first, with a limit of 2P chunk activations (1F1B's
                  peak on stage 0), a few priority variants tried, the best
                  makespan kept.
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
            for (int p = 0; p < P; p++) g->limit[p]++, g->hlimit[p]++;
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
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_generate: kind %d is not a vs_pipe_kind", (int)kind);
    const char* kn = vs_pipe_kind_name(kind);
    if (stages < 1 || stages > VS_PIPE_MAX_CHUNKS)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_generate: %s: stages = %d (1..%d)", kn, stages,
                            VS_PIPE_MAX_CHUNKS);
    if (mbs < 1) return vs_set_error(VS_ERR_INVALID, "vs_pipe_generate: %s: microbatch count %d (at least 1)", kn, mbs);
    int vshape = kind == VS_PIPE_ZBV || kind == VS_PIPE_DUALPIPEV;
    int V = chunks ? chunks : vshape ? 2 : 1;
    if (vshape && V != 2)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_generate: %s: chunks = %d per stage (it places 2, in a V)", kn,
                            chunks);
    if (kind != VS_PIPE_INTERLEAVED && !vshape && V != 1)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_generate: %s: chunks = %d per stage (it runs 1; interleaved runs several)",
                            kn, chunks);
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
            vs_pipe_sched_free(best);
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
                vs_pipe_sched_free(best);
                best = s, best_span = span, s = NULL;
            }
            vs_pipe_sched_free(s);
            s = NULL;
        }
    }
done:
    for (int p = 0; best && r == VS_OK && p < P; p++) r = vs_pipe_sched_push(best, p, VS_PIPE_STEP, 0, 0);
    if (r == VS_OK) r = vs_pipe_sched_add_comm(best);
    vs_free(world, buf);
    vs_free(world, g);
    if (r != VS_OK) {
        vs_pipe_sched_free(best);
        return r;
    }
    *out = best;
    return VS_OK;
}
// >>pipe-gen end

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
    _vs_pipe_cat(buf, cap, &len,
                 "# %d stages, %d chunks, %d microbatches; one column = %g time units; makespan %g, bubble %.1f%%\n"
                 "# F forward, B backward for the input, W backward for the weights, BW full backward;\n"
                 "# %s; '-' goes on, '.' idle\n",
                 s->stages, s->nchunks, s->mbs, slot, sim.makespan, 100 * sim.bubble,
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
            int a = (int)floor(t0[o + i] / slot + 1e-9), b = (int)ceil(t1[o + i] / slot - 1e-9);
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
// >>pipe-sim end

// >>pipe-engine ----------------------------------------------------------------
// >>pipe-engine end

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
