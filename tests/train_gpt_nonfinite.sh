#!/usr/bin/env bash
# examples/train_gpt.c --nan-from S (issue 33): from step S on the gradients are
# NaN, and nothing is silent by default (VESCALE_LOG unset: the level is warn):
#  - 4 steps on PP1 x DP2 x TP2 beside one rank, NaN from step 2: status 0; each
#    of the 4 ranks warns that steps 2 and 3 were skipped (vs_train_step's line
#    naming the step, and no second line from its DDP), the table marks both, and
#    the run counts 2 of 4 skipped;
#  - every step NaN: status 1, "every step was skipped";
#  - VESCALE_LOG=off silences the warnings (the table and the count stay).
# Prints "ok/not ok example/train_gpt_nonfinite ..." lines.
set -u
. "$(dirname "$0")/train_gpt_common.sh" train_gpt_nonfinite # (B, bin, tmp, fails, say)
unset VESCALE_LOG

"$bin" --mesh 1x2x2 --steps 4 --nan-from 2 >"$tmp/out.log" 2>"$tmp/err.log"
rc=$?
warns=0
for r in 0 1 2 3; do
    for s in 2 3; do
        grep -q "^vescale warn: \[rank $r\] vs_train_step (step $s): .*step skipped" "$tmp/err.log" && warns=$((warns + 1))
    done
done
marked=$(grep -c 'skipped: the gradients are not finite' "$tmp/out.log")
say "$([ $rc = 0 ] && [ $warns = 8 ] && [ "$marked" = 2 ] && grep -q '^2 of 4 steps skipped' "$tmp/out.log" && echo 1)" \
    "NaN from step 2 on 1x2x2: $warns of 8 warn lines (4 ranks x 2 steps), $marked steps marked skipped (status $rc)"
[ $rc = 0 ] && [ $warns = 8 ] || { tail -5 "$tmp/out.log"; head -5 "$tmp/err.log"; }
# one warning a rank and step: the training state's DDP says its own at info, not a second warning
ddpwarns=$(grep -c "^vescale warn: .*vs_ddp_step: step skipped" "$tmp/err.log")
say "$([ "$ddpwarns" = 0 ] && echo 1)" "NaN from step 2 on 1x2x2: $ddpwarns second warnings from the training state's DDP (want 0)"

"$bin" --mesh 1x2x1 --steps 3 --nan-from 0 --no-reference >"$tmp/all.log" 2>&1
rc=$?
say "$([ $rc = 1 ] && grep -q 'every step was skipped' "$tmp/all.log" && echo 1)" "every step NaN: status $rc (want 1), $(grep -o 'every step was skipped[^:]*' "$tmp/all.log")"

VESCALE_LOG=off "$bin" --mesh 1x2x1 --steps 3 --nan-from 1 --no-reference >"$tmp/off.log" 2>"$tmp/offerr.log"
rc=$?
say "$([ $rc = 0 ] && ! grep -q 'vescale warn' "$tmp/offerr.log" && grep -q '^2 of 3 steps skipped' "$tmp/off.log" && echo 1)" \
    "VESCALE_LOG=off: no warnings, the count stays (status $rc)"
[ $fails = 0 ]
