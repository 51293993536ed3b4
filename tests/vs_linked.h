/* tests/vs_linked.h - force-included (-include) into a test that links the
   implementation from $(B)/impl/<config>.o (tests/vs_impl.c) instead of compiling
   it: the parts are marked implemented, so the test's own
   `#define VESCALE_IMPLEMENTATION` gives declarations only. The system headers the
   implementation includes come first, as they did when it was compiled in, so a
   test that leaned on one of them compiles the same. */
#ifndef VS_LINKED_H
#define VS_LINKED_H
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#ifdef VESCALE_MPI
#include <mpi.h> /* the MPI tests call MPI themselves */
#endif
#define VESCALE_MESH_IMPLEMENTED
#define VESCALE_DDP_IMPLEMENTED
#define VESCALE_PIPE_IMPLEMENTED
#define VESCALE_CKPT_IMPLEMENTED
#define VESCALE_HL_IMPLEMENTED
#endif
