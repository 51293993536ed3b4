/* test_ddp_memory.c - the memory bounds of issue 34 (section 5, "Memory") on the
   example GPT's parameters, measured as bench/ddp_memory.c measures them (the
   world's allocator hooks, each rank thread apart, and vs_ddp_memory_usage), at
   DP 2, 4 and 8 for ZeRO-3 and HSDP (DPR2 x DPS(DP/2)):
   - at rest, parameters + gradients + optimizer state a rank <= 1.05 x (total /
     shard ranks) + one group's padding, and below ZeRO-1's;
   - vs_ddp_memory_usage reports all the DDP holds: what the hooks see live after
     finalize is exactly its sum (owned state, the gathered pool, the gradient
     staging pool, the f32 scratch, the DDP's tables), and the scratch is a shard
     of the largest group (worked out here);
   - the peak through the hooks within 5% of the formula: the owned state + the
     groups gathered at once (current + prefetched: 2 x the largest group) + the
     gradient staging pool (2 x the largest group's gradients: one reduces while
     the next is written) + the scratch + the tables, on the example GPT and on
     a larger one (bench/ddp_memory.c's "GPT D256 L4"); what is left is the
     transport's (its handles of collectives waited for, kept a while to catch a
     second wait, and those in flight);
   - no step after the first allocates anything of 4 KiB or more, also when the
     head's unit holds the tied embedding's group beside its own (3 groups at
     once with the prefetch: the pool sized at the first step's end). */
#define DM_NO_MAIN
#include "../bench/ddp_memory.c"
#include "vs_test.h"

/* The largest group's elements, worked out from the model. */
static int64_t dm_max_group(const dm_gpt* g)
{
    dm_param ps[DM_MAXP];
    int np = dm_model(g, ps);
    int64_t gsz[DM_MAXP] = {0}, maxg = 0;
    for (int i = 0; i < np; i++) gsz[ps[i].group] += ps[i].numel;
    for (int k = 1; k <= dm_ngroups(g); k++) maxg = gsz[k] > maxg ? gsz[k] : maxg;
    return maxg;
}

static void check(const dm_gpt* g, int kind, int dp)
{
    dm_row w, w1;
    dm_measure(g, kind, dp, &w);
    dm_measure(g, DM_Z1, dp, &w1);
    VT_CHECK(w.ok && w1.ok, "%s DP%d: the run failed: %s %s", dm_kind_name[kind], dp, w.err, w1.err);
    if (!w.ok || !w1.ok) return;
    dm_print(&w);
    VT_CHECK(w.rest <= w.bound, "%s DP%d: %zu bytes at rest, above the bound %zu", dm_kind_name[kind], dp, w.rest,
             w.bound);
    VT_CHECK(kind == DM_HSDP && dp == 2 ? w.rest <= 2 * w1.rest : w.rest < w1.rest,
             "%s DP%d: %zu bytes at rest, ZeRO-1 %zu", dm_kind_name[kind], dp, w.rest, w1.rest);
    VT_CHECK(w.peak >= w.formula, "%s DP%d: peak %zu below the formula %zu: a buffer the formula counts is missing",
             dm_kind_name[kind], dp, w.peak, w.formula);
    VT_CHECK((double)w.peak <= 1.05 * (double)w.formula, "%s DP%d: peak %zu, more than 5%% above the formula %zu",
             dm_kind_name[kind], dp, w.peak, w.formula);
    VT_CHECK(w.other == 0, "%s DP%d: the hooks see %zu bytes live at rest, vs_ddp_memory_usage reports %zu",
             dm_kind_name[kind], dp, w.hooks_rest, w.formula);
    VT_CHECK(w.scratch == w.scratch_want && w.tables > 0, "%s DP%d: scratch %zu bytes, want %zu (tables %zu)",
             dm_kind_name[kind], dp, w.scratch, w.scratch_want, w.tables);
    VT_CHECK(w.big_steady == 0, "%s DP%d: %ld allocations of %d bytes or more in a steady step", dm_kind_name[kind],
             dp, w.big_steady, DM_BIG);
    /* the gathered pool: the current group and one prefetched, each the largest group over the shard ranks */
    int shard = kind == DM_HSDP ? dp / 2 : dp;
    int64_t maxg = dm_max_group(g);
    VT_CHECK(w.gathered == 2 * (size_t)gsz_pad(maxg, shard) * 4, "%s DP%d: gathered pool %zu bytes, want 2 x %lld",
             dm_kind_name[kind], dp, w.gathered, (long long)gsz_pad(maxg, shard) * 4);
    VT_CHECK(w.staging == 2 * (size_t)gsz_pad(maxg, shard) * 4, "%s DP%d: gradient staging %zu bytes, want 2 x %lld",
             dm_kind_name[kind], dp, w.staging, (long long)gsz_pad(maxg, shard) * 4);
}

/* The head's unit holding the embedding's group too (vs_parallelize's tied wte):
   the first step holds 2 groups at once, a later one 3 with the prefetch; the
   pool reaches 3 at the first step's end, so no later step allocates it. */
static void check_tied(const dm_gpt* g, int kind, int dp)
{
    dm_row w;
    dm_measure_ex(g, kind, dp, 1, &w);
    VT_CHECK(w.ok, "%s DP%d tied: the run failed: %s", dm_kind_name[kind], dp, w.err);
    if (!w.ok) return;
    dm_print(&w);
    int shard = kind == DM_HSDP ? dp / 2 : dp;
    int64_t maxg = dm_max_group(g);
    VT_CHECK(w.gathered == 3 * (size_t)gsz_pad(maxg, shard) * 4, "%s DP%d tied: gathered pool %zu bytes, want 3 x %lld",
             dm_kind_name[kind], dp, w.gathered, (long long)gsz_pad(maxg, shard) * 4);
    VT_CHECK(w.big_steady == 0, "%s DP%d tied: %ld allocations of %d bytes or more in a step after the first (the "
             "pool grew then)", dm_kind_name[kind], dp, w.big_steady, DM_BIG);
    VT_CHECK(w.peak >= w.formula && (double)w.peak <= 1.05 * (double)w.formula,
             "%s DP%d tied: peak %zu, the formula %zu", dm_kind_name[kind], dp, w.peak, w.formula);
}

int main(void)
{
    static const int dps[3] = {2, 4, 8};
    for (int m = 0; m < 2; m++) {
        dm_header(&dm_gpts[m]);
        for (int k = DM_Z3; k <= DM_HSDP; k++)
            for (int i = 0; i < 3; i++) {
                char name[160];
                snprintf(name, sizeof name, "memory/%s %s DP%d: at rest <= 1.05 x total/DP + a group's padding, peak = "
                         "the formula within 5%%", dm_gpts[m].name, dm_kind_name[k], dps[i]);
                VT_CASE(name, check(&dm_gpts[m], k, dps[i]));
            }
    }
    dm_header(&dm_gpts[0]);
    for (int k = DM_Z3; k <= DM_HSDP; k++)
        for (int i = 0; i < 3; i++) {
            char name[160];
            snprintf(name, sizeof name, "memory/example GPT %s DP%d, the head holding the tied embedding's group: the "
                     "pool sized by the first step, no later step allocates", dm_kind_name[k], dps[i]);
            VT_CASE(name, check_tied(&dm_gpts[0], k, dps[i]));
        }
    return vt_summary();
}
