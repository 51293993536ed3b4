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
    const char* points;          // manual: the P*V-1 unit names that start a chunk, in
                                 // model order, "l4,l8,l12" (spaces around names ignored)
    vs_pipe_placement placement;
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
   order). Cuts fall only between groups: consecutive units with the same non-NULL
   group name are one unsplittable block (a group name coming back after other
   units is an error). Balanced kinds minimise the largest chunk cost exactly
   (every unit counts, embedding and loss included); among the splits that reach it
   they take the one with the least sum of squared chunk costs, then the earliest
   cut positions (9 equal units in 4 chunks: 2, 2, 2, 3). Splitting by flops (the
   default without points) when every unit's flops is 0 is an error, not a guess.
   Bad input is VS_ERR_INVALID (VS_ERR_NULL for NULL pointers and unit names) with
   the bad value named: more chunks than units or groups, unknown, repeated,
   out-of-order or group-cutting split points, a wrong number of them, a negative
   or non-finite cost, duplicate unit names. On error *out is zeroed. Any thread;
   time O(P*V*units^2) at worst, near O(units^2) on ordinary models; memory
   O(P*V*units). */
VS_API vs_result vs_pipe_split(const vs_pipe_unit* units, int nunits,
                               const vs_pipe_split_desc* desc, vs_pipe_plan* out);
/* A readable plan: a header (kind, measure, P x V, placement, largest and smallest
   chunk cost, max/mean imbalance) and one line per chunk with its stage, its units
   (names when 3 or fewer, else the first..last range) and its cost. units may be
   NULL (indices are printed). Returns the length it needs (snprintf-like, the text
   is cut to cap-1 bytes and NUL-terminated); buf may be NULL when cap is 0. */
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
   (0: the smallest cost). Returns the length it needs (snprintf-like). */
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
    const int P = desc->stages, V = desc->chunks ? desc->chunks : 1;
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
    vs_pipe_placement place = desc->placement == VS_PIPE_PLACE_DEFAULT ? VS_PIPE_PLACE_LOOP : desc->placement;
    if (place != VS_PIPE_PLACE_LOOP && place != VS_PIPE_PLACE_V)
        return vs_set_error(VS_ERR_INVALID, "vs_pipe_split: placement = %d is not a vs_pipe_placement", (int)desc->placement);
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

VS_API int vs_pipe_plan_print(const vs_pipe_plan* p, const vs_pipe_unit* units, char* buf, size_t cap)
{
    size_t len = 0;
    if (buf && cap) buf[0] = 0;
    if (!p) return 0;
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

// >>pipe-sched end

// >>pipe-gen -------------------------------------------------------------------
/* (generators: filled in by their own change) */
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

VS_API vs_result vs_pipe_generate(const vs_world* world, vs_pipe_kind kind, int stages, int chunks, int mbs,
                                  vs_pipe_sched** out)
{
    (void)world, (void)kind, (void)stages, (void)chunks, (void)mbs, (void)out;
    return vs_set_error(VS_ERR_UNSUPPORTED, "vs_pipe_generate: not yet");
}
// >>pipe-gen end

// >>pipe-sim -------------------------------------------------------------------
/* (simulator: filled in by its own change) */
VS_API vs_result vs_pipe_simulate(const vs_pipe_sched* s, const vs_pipe_costs* costs, vs_pipe_sim* out)
{
    (void)s, (void)costs, (void)out;
    return vs_set_error(VS_ERR_UNSUPPORTED, "vs_pipe_simulate: not yet");
}
VS_API int vs_pipe_draw(const vs_pipe_sched* s, const vs_pipe_costs* costs, double slot, char* buf, size_t cap)
{
    (void)s, (void)costs, (void)slot, (void)buf, (void)cap;
    return 0;
}
VS_API vs_result vs_pipe_trace_simulated(const vs_pipe_sched* s, const vs_pipe_costs* costs, const char* path)
{
    (void)s, (void)costs, (void)path;
    return vs_set_error(VS_ERR_UNSUPPORTED, "vs_pipe_trace_simulated: not yet");
}
VS_API vs_result vs_pipe_trace_write(const vs_pipe_sched* s, const double* const* t0, const double* const* t1,
                                     const char* path)
{
    (void)s, (void)t0, (void)t1, (void)path;
    return vs_set_error(VS_ERR_UNSUPPORTED, "vs_pipe_trace_write: not yet");
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
