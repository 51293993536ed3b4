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

#ifdef __cplusplus
}
#endif
#endif // VESCALE_PIPE_INCLUDED

#if defined(VESCALE_PIPE_IMPLEMENTATION) && !defined(VESCALE_PIPE_IMPLEMENTED)
#define VESCALE_PIPE_IMPLEMENTED
#ifdef __cplusplus
extern "C" {
#endif
VS_API int vs_pipe_version(void) { return VESCALE_VERSION_NUMBER; }
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
