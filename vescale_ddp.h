/* vescale_ddp.h - DDP (bucketed gradient sync overlapped with backward) and the DistributedOptimizer (ZeRO-1/2).

   Status: skeleton. This header compiles and links so trainers can include it;
   its API arrives with its own issue. Everything it builds on is in
   vescale_mesh.h, which it includes.

   Do this in *one* C or C++ file:
       #define VESCALE_IMPLEMENTATION        (every part), or
       #define VESCALE_DDP_IMPLEMENTATION   (this part only; the mesh
                                              implementation must then be
                                              enabled somewhere as well)
       #include "vescale_ddp.h"
*/
/* Before the guard, so a later include with VESCALE_IMPLEMENTATION still works. */
#if defined(VESCALE_IMPLEMENTATION) && !defined(VESCALE_DDP_IMPLEMENTATION)
#define VESCALE_DDP_IMPLEMENTATION
#endif

#ifndef VESCALE_DDP_INCLUDED
#define VESCALE_DDP_INCLUDED

#include "vescale_mesh.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The VESCALE_VERSION_NUMBER this part was built with (catches a part compiled
   from a different release than vescale_mesh.h). */
VS_API int vs_ddp_version(void);

#ifdef __cplusplus
}
#endif
#endif // VESCALE_DDP_INCLUDED

#if defined(VESCALE_DDP_IMPLEMENTATION) && !defined(VESCALE_DDP_IMPLEMENTED)
#define VESCALE_DDP_IMPLEMENTED
#ifdef __cplusplus
extern "C" {
#endif
VS_API int vs_ddp_version(void) { return VESCALE_VERSION_NUMBER; }
#ifdef __cplusplus
}
#endif
#endif // VESCALE_DDP_IMPLEMENTATION
