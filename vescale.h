/* vescale.h - nD-parallel training for C/C++ trainers: one device mesh for data,
   tensor/sequence, pipeline parallel and ZeRO, over threads, MPI or NCCL.

   This header includes every part:
       vescale_mesh.h   results, hooks, dtypes, transports, bootstrap, device mesh,
                        layouts and redistribute, TP/SP regions, sharded init
       vescale_ddp.h    DDP and the distributed optimizer (ZeRO-1/2)
       vescale_pipe.h   pipeline schedules and engine            (skeleton)
       vescale_ckpt.h   distributed, resharding checkpoints      (skeleton)

   Do this in *one* C or C++ file:
       #define VESCALE_IMPLEMENTATION
       #include "vescale.h"
   and just #include "vescale.h" everywhere else. With VESCALE_STATIC defined
   everywhere instead, every function is static inline (single-TU builds).

   Macros: see vescale_mesh.h (VESCALE_STATIC, VESCALE_MPI, VESCALE_NCCL, VS_ASSERT).
   Link: -lpthread -lm; -lmpi with VESCALE_MPI; -lcudart -lnccl with VESCALE_NCCL.
   The high-level API (model description, sharding plans, parallelize, training
   state save/load) arrives here with its issue.
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
