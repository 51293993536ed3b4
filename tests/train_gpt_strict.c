/* train_gpt_strict.c - examples/train_gpt.c with --device cuda over the strict
   CUDA + NCCL stand-in (tests/strict/: 8 simulated GPUs, no GPU needed): the
   trainer's own device path (NCCL launch, pinned batches, gpt.h's units as
   gpt_kernels.h's kernels) end to end, beside its one-rank host run (make test
   runs it; tests/run.sh). Exits 1 on any stand-in violation. */
#define main train_gpt_main
#include "../examples/train_gpt.c"
#undef main

#include "strict/vs_strict.h"
#include "gpt_strict_kernels.h"

int main(int argc, char** argv)
{
    gpt_strict_register();
    int rc = train_gpt_main(argc, argv);
    if (vs_strict_violations()) {
        fprintf(stderr, "train_gpt_strict: %ld stand-in violations, the first: %s\n", (long)vs_strict_violations(),
                vs_strict_first_violation());
        return 1;
    }
    return rc;
}
