/* test_train_counts.c - ZeRO-3 through vs_parallelize on simulated GPUs (the
   strict stand-in, no GPU): the example GPT's steps counted as
   bench/train_counts.c counts them, on DP2, HSDP (DPR2 x DPS2) and PP2 x DP2 x
   TP2. The unit hooks hold a layer's group and the tied embedding's group at
   once, plus one prefetched: more than vs_ddp_finalize's gathered pool (the
   current group and the prefetched one), which the first step's end sizes
   from what that step held. Asserted (issue 34, section 5, "Device"):
   - every step after the first: no device allocation and one host wait a step
     (the gradient norm's read), so the pool never grows in a later step, where
     its cudaMalloc would synchronize the device beside a gather in flight
     (vs_ddp_synchronize first: a second host wait);
   - after the warm-up: no CUDA event created, no NVRTC library loaded, one
     device-to-host copy;
   - no stand-in violation (a missing wait, a malloc beside a collective). */
#define TC_NO_MAIN
#include "../bench/train_counts.c"
#include "vs_test.h"

int main(void)
{
    gpt_strict_register();
    tc_header();
    for (int i = 0; i < TC_NCFGS; i++) {
        const cfg* C = &tc_cfgs[i];
        if (C->zero != 3) continue;
        char name[160];
        snprintf(name, sizeof name, "counts/vs_parallelize %s: no device allocation and one host wait in every step "
                 "after the first", C->name);
        long v0 = vs_strict_violations();
        VT_CASE(name, {
            tc_row o = tc_run(C);
            tc_print(C, &o);
            VT_CHECK(o.ok, "the run failed");
            VT_CHECK(o.first_allocs == 0, "%.3f device allocations a step after the first", o.first_allocs);
            VT_CHECK(o.first_syncs <= 1 + 1e-9, "%.3f host syncs a step after the first (want 1: the norm's read)",
                     o.first_syncs);
            VT_CHECK(o.allocs == 0 && o.events == 0 && o.libs == 0 && o.d2h <= 1 + 1e-9,
                     "steady: %.2f allocations, %.2f events, %.2f libraries, %.2f device-to-host copies a step",
                     o.allocs, o.events, o.libs, o.d2h);
            VT_CHECK(vs_strict_violations() == v0, "%ld stand-in violations, the first: %s",
                     vs_strict_violations() - v0, vs_strict_first_violation());
        });
    }
    return vt_summary();
}
