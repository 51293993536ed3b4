/* tests/vs_private.h - force-included (-include, with -I$(B)/priv first) into a
   test that reads private parts (a handle's struct, a _vs_* helper, a _VS_*
   macro) but links the implementation from $(B)/impl/<config>.o: every part's
   implementation as make wrote it into $(B)/priv/ (tests/vs_private.awk), the
   public functions declared only. The test compiles the private helpers it calls
   itself (static, as before); the public functions, and the rest of the library
   they reach, are the object's. The test's own includes of the headers then add
   nothing (their guards are set here).
   What cannot come this way: a test that sets a macro the implementation reads
   (it compiles its own), and one that reads the library's static state (the
   kernel cache's counts: its copy here would be another one). */
#ifndef VS_PRIVATE_H
#define VS_PRIVATE_H
#if defined(__GNUC__) || defined(__clang__)
/* the private helpers and tables only the public functions used are left unused
   here: not a defect of the test */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"
#if defined(__clang__) || !defined(__cplusplus)
#pragma GCC diagnostic ignored "-Wunused-const-variable"
#endif
#endif
#define VESCALE_IMPLEMENTATION
#include "vescale.h" /* $(B)/priv/vescale.h: the include path puts it first */
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif
