/* vescale_ckpt.h - distributed checkpoint: sharded, atomic save and resharding load.

   Status: skeleton. This header compiles and links so trainers can include it;
   its API arrives with its own issue. Everything it builds on is in
   vescale_mesh.h, which it includes.

   Do this in *one* C or C++ file:
       #define VESCALE_IMPLEMENTATION        (every part), or
       #define VESCALE_CKPT_IMPLEMENTATION   (this part only; the mesh
                                              implementation must then be
                                              enabled somewhere as well)
       #include "vescale_ckpt.h"
*/
/* Before the guard, so a later include with VESCALE_IMPLEMENTATION still works. */
/* VESCALE_STATIC: every part included is implemented here, static inline. */
#if defined(VESCALE_STATIC) && !defined(VESCALE_IMPLEMENTATION)
#define VESCALE_IMPLEMENTATION
#endif
#if defined(VESCALE_IMPLEMENTATION) && !defined(VESCALE_CKPT_IMPLEMENTATION)
#define VESCALE_CKPT_IMPLEMENTATION
#endif

#ifndef VESCALE_CKPT_INCLUDED
#define VESCALE_CKPT_INCLUDED

#include "vescale_mesh.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The VESCALE_VERSION_NUMBER this part was built with (catches a part compiled
   from a different release than vescale_mesh.h). */
VS_API int vs_ckpt_version(void);

#ifdef __cplusplus
}
#endif
#endif // VESCALE_CKPT_INCLUDED

#if defined(VESCALE_CKPT_IMPLEMENTATION) && !defined(VESCALE_CKPT_IMPLEMENTED)
#define VESCALE_CKPT_IMPLEMENTED
#ifdef __cplusplus
extern "C" {
#endif
VS_API int vs_ckpt_version(void) { return VESCALE_VERSION_NUMBER; }
#ifdef __cplusplus
}
#endif
#endif // VESCALE_CKPT_IMPLEMENTATION
