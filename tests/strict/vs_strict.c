/* tests/strict/vs_strict.c - the strict stand-in compiled once: make builds it into
   $(B)/impl/standin.o (with tests/vs_private.h, as the programs that link it: the
   stand-in runs the library's private host kernels), and every program of the
   stand-in but test_nccl_strict (IMPL_OWN) is compiled with VS_STRICT_LINKED, which
   leaves it vs_strict.h's interface, and links it beside $(B)/impl/strict.o. */
#include <cuda_runtime.h>
#include "vs_strict.h"
