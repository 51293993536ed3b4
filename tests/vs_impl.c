/* tests/vs_impl.c - the library's implementation, compiled once per configuration
   (make: $(B)/impl/<config>.o; plain threads, MPI, VESCALE_NT_MIN=0, each under
   the build's SAN= flags) and linked by every test binary that uses only the
   public API (those compiled with -include tests/vs_linked.h). Every part: a test
   that includes only vescale_mesh.h links the same object. */
#define VESCALE_IMPLEMENTATION
#include "vescale.h"
