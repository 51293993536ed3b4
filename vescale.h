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

/* The parts' implementations are switched on by their own headers when
   VESCALE_IMPLEMENTATION is defined; a second include is harmless. */
#ifdef VESCALE_IMPLEMENTATION
#include "vescale_mesh.h"
#include "vescale_ddp.h"
#include "vescale_pipe.h"
#include "vescale_ckpt.h"
#endif

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
