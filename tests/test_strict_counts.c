/* test_strict_counts.c - the steady-state targets bench/strict_counts.c measures
   that the NCCL path meets, enforced over the strict stand-in (make test:
   build/test_strict_counts; no GPU). Per step and rank after warm-up, on 2
   simulated GPUs: no device allocation or free, no CUDA event created, no NVRTC
   library loaded, no host-to-device copy; DDP reads at most one value back (the
   clip's norm: it was 2 copies out and 1 in, S2-7); the vocab functions and
   vs_redistribute copy nothing to the host (the ids were, S2-3); an uneven
   all-gather or reduce-scatter is at most one NCCL collective (it was one per
   rank, S2-5). ZeRO-3 and HSDP (issue 34) too: a steady step gathers every
   group in the forward and the backward (but the forward's last, kept for
   it), prefetched, with no device
   allocation, no event created, and no host wait but the loss's (so no gather
   is waited for by the host: it completes in stream order). Host syncs: a DDP step with its loss read makes one (DDP's
   reductions and ZeRO gathers complete in stream order, vs_wait_stream: it was
   4 to 7.5 a step, the loss aside); a clip's read is that one (it added
   three); a TP step (the three vocab functions, which return when enqueued,
   and the loss read to the host that a trainer makes) at most one, the read
   (the functions made one each, eight before that); vs_redistribute, the TP/SP
   regions and vs_init_fill none (redistribute drained its streams after each
   step: 1.25 to 2.5 a call; the others one a call). */
#define SC_NO_MAIN
#include "../bench/strict_counts.c"
#include "vs_test.h"

static void check_row(const char* what, sc_row o, double d2h_max)
{
    VT_CHECK(o.ok, "%s: the run failed", what);
    VT_CHECK(o.al == 0 && o.fr == 0, "%s: %.2f device allocations and %.2f frees a step", what, o.al, o.fr);
    VT_CHECK(o.ev == 0, "%s: %.2f CUDA events created a step", what, o.ev);
    VT_CHECK(o.lib == 0, "%s: %.2f NVRTC libraries loaded a step", what, o.lib);
    VT_CHECK(o.h2d == 0 && o.d2h <= d2h_max, "%s: %.2f host-to-device and %.2f device-to-host copies a step (at most %g)",
             what, o.h2d, o.d2h, d2h_max);
}

int main(void)
{
    STEPS = 3;
    header();
    char name[160];
    sc_row d[NCFGS];
    for (int i = 0; i < NCFGS; i++) {
        int n = cfgs[i].hsdp ? 4 : 2; /* HSDP: DPR2 x DPS2 */
        snprintf(name, sizeof name, "counts/DDP %sZeRO-%d%s, n=%d: nothing allocated or copied, one host wait a step (the loss)%s%s",
                 cfgs[i].hsdp ? "HSDP " : "", (int)cfgs[i].zero, cfgs[i].clip > 0 ? " clipped" : "", n,
                 cfgs[i].clip > 0 ? ", the clip's read" : "", cfgs[i].zero == VS_ZERO_3 ? "; no gather waited for by the host" : "");
        long v0 = vs_strict_violations();
        VT_CASE(name, {
            check_row(name, d[i] = ddp_row(n, i), cfgs[i].clip > 0 ? 1 : 0);
            /* every use of a gathered (prefetched) buffer ordered after its gather, and
               every gather into a reused buffer after the reads of its last contents */
            VT_CHECK(vs_strict_violations() == v0, "%ld stand-in violations in this case, the first: %s",
                     vs_strict_violations() - v0, vs_strict_first_violation());
            /* the reductions and the ZeRO gathers complete in stream order
               (vs_wait_stream): no host wait of DDP's own, so a step with its
               loss read makes one (the clip's read, which the loss's copy
               precedes, or vs_sync_stream) */
            VT_CHECK(d[i].sy <= 1 + 1e-9, "%.2f host syncs a step with its loss read (at most 1)", d[i].sy);
            if (cfgs[i].zero == VS_ZERO_3) { /* NP groups of one f32 bucket each: NP gathers in the forward, NP - 1
                                                in the backward (the forward's last group kept for it), NP
                                                reduce-scatters; HSDP an all-reduce of each owned shard over DPR;
                                                the clip one of the norm */
                double want = NP + (NP - 1) + NP + (cfgs[i].hsdp ? NP : 0) + (cfgs[i].clip > 0 ? 1 : 0);
                VT_CHECK(fabs(d[i].co - want) < 1e-9, "%.2f NCCL collectives a step, want %.0f", d[i].co, want);
            }
            if (i % 2) /* cfgs: each stage without, then with the clip */
                VT_CHECK(d[i].sy - d[i - 1].sy <= 1 + 1e-9, /* (per-step means: not exact in binary) */ "the clip adds %.2f host syncs a step", d[i].sy - d[i - 1].sy);
        });
    }
    VT_CASE("counts/TP vocab, n=2: nothing allocated, no ids copied to the host, one sync a step (the loss read)", {
        /* 8 steps (24 calls): the ring of 16 id checks (>>tp) then reuses slots of
           calls made inside the window, and querying their events is free only
           by what the loss reads proved, transitively (the stand-in's "seen") */
        int steps = STEPS;
        STEPS = 8;
        sc_row o = vocab_row(2);
        STEPS = steps;
        check_row("vocab", o, 0); /* (the loss read's copy is the test's own) */
        VT_CHECK(o.sy <= 1 + 1e-9, "%.2f host syncs for the 3 calls and the loss read of a step (at most 1)", o.sy);
    });
    VT_CASE("counts/vs_redistribute (and vs_tp_*, vs_sp_*, vs_init_fill), n=2: no scratch allocated, no host sync a call", {
        sc_row o = redist_row(2);
        check_row("redistribute", o, 0);
        VT_CHECK(o.sy < 1e-9, "%.2f host syncs a call (want none: the result is ready in stream order)", o.sy);
        /* and the TP/SP regions built on it, and vs_init_fill on device buffers */
        o = tpsp_row(2);
        check_row("tp/sp/init", o, 0);
        VT_CHECK(o.sy < 1e-9, "%.2f host syncs a vs_tp_*/vs_sp_*/vs_init_fill call (want none)", o.sy);
    });
    VT_CASE("counts/uneven all_gatherv + reduce_scatterv, n=4: at most one NCCL collective a call", {
        sc_row o = uneven_row(4);
        check_row("uneven", o, 0);
        VT_CHECK(o.co <= 1, "%.2f NCCL collectives a call (one per rank was the old v-form)", o.co);
    });
    VT_CASE("strict/no violations", VT_CHECK(vs_strict_violations() == 0, "%ld violations, the first: %s",
                                             vs_strict_violations(), vs_strict_first_violation()));
    return vt_summary();
}
