#!/usr/bin/env bash
# tests/flat_trainer_check.sh - examples/flat_trainer.c both ways (issue 22.7):
#   1. the single-device trainer (its own AdamW, no vescale): its loss falls;
#   2. its vescale port on DP2 x TP2 thread ranks beside one rank: within 1e-6 (its verdict);
#   3. the port on one rank reproduces the single-device trainer's losses within 1e-6;
#   4. the DP-only form (-DDP, $B/flat_trainer_dp; built here if make did not) on DP2 reproduces
#      them within 1e-6 too;
#   5. README.md states the size of the diff from the single-device form to each port;
#   6. the FSDP form (-DFSDP, $B/flat_trainer_fsdp) on DP2 and DP4 reproduces them within 1e-6.
# Prints "ok ..." / "not ok ..." lines (tests/run.sh counts them).
set -u
B=${1:-build}
cd "$(dirname "$0")/.." || exit 2
steps=20
one=$("$B/flat_trainer" --steps $steps) || { echo "not ok flat_trainer: exit status $?"; exit 1; }
echo "$one"
# 1. the loss falls: the last step's is below 0.7 x the first's (4.18 -> about 2.1 in 20 steps)
echo "$one" | awk 'NR == 2 { first = $2 } NR > 1 { last = $2 }
    END { if (last < 0.7 * first) print "ok flat_trainer: loss", first, "->", last;
          else print "not ok flat_trainer: loss", first, "->", last, "(not below 0.7 x the first)" }'
par=$("$B/flat_trainer_dp_tp" --dp 2 --tp 2 --steps $steps)
rc=$?
echo "$par"
# 2. its own verdict
[ $rc -eq 0 ] && echo "ok flat_trainer_dp_tp: DP2 x TP2 equals one rank within 1e-6" ||
    echo "not ok flat_trainer_dp_tp: exit status $rc"
# same_losses ONE OTHER N WHAT: the loss columns (step, loss) of ONE and OTHER agree step by step
same_losses() {
    paste <(echo "$1" | awk 'NR > 1 { print $1, $2 }') <(echo "$2" | awk 'NR > 1 && $1 ~ /^[0-9]+$/ { print $1, $2 }') |
        awk -v n="$3" -v what="$4" '{ rel = ($4 - $2) / $2; if (rel < 0) rel = -rel; if ($1 != $3) bad = 1; if (rel > worst) worst = rel; rows++ }
            END { if (!bad && rows == n && worst <= 1e-6)
                      printf "ok flat_trainer: %s equals the single-device trainer within %.2g (bar 1e-6)\n", what, worst;
                  else printf "not ok flat_trainer: %s vs single device: %d rows, largest relative difference %.3g (bar 1e-6)\n", what, rows, worst }'
}
# 3. the one-rank column against the single-device trainer, step by step
same_losses "$one" "$par" $steps "vescale on one rank (ZeRO-1 AdamW)"
# 4. the DP-only form (the Makefile builds it against the shared object; built here alone if missing)
dp=$B/flat_trainer_dp
if [ ! -x "$dp" ] || [ examples/flat_trainer.c -nt "$dp" ] || [ vescale_ddp.h -nt "$dp" ] || [ vescale_mesh.h -nt "$dp" ]; then
    ${CC:-cc} -std=c99 -O2 -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L -I. -DDP -o "$dp" examples/flat_trainer.c \
        -lpthread -lm || echo "not ok flat_trainer: the DP form (-DDP) does not build"
fi
dpo=$("$dp" --dp 2 --steps $steps)
rc=$?
echo "$dpo"
[ $rc -eq 0 ] && same_losses "$one" "$dpo" $steps "the DP form on DP2 (ZeRO-1 AdamW, half the batch a rank)" ||
    echo "not ok flat_trainer_dp: exit status $rc"
# 6. the FSDP form (-DFSDP: ZeRO-3, gather/release around its layer loop) on DP2 and DP4
fs=$B/flat_trainer_fsdp
if [ ! -x "$fs" ] || [ examples/flat_trainer.c -nt "$fs" ] || [ vescale_ddp.h -nt "$fs" ] || [ vescale_mesh.h -nt "$fs" ]; then
    ${CC:-cc} -std=c99 -O2 -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L -I. -DFSDP -o "$fs" examples/flat_trainer.c \
        -lpthread -lm || echo "not ok flat_trainer: the FSDP form (-DFSDP) does not build"
fi
for n in 2 4; do
    fso=$("$fs" --dp $n --steps $steps)
    rc=$?
    [ $n -eq 2 ] && echo "$fso"
    [ $rc -eq 0 ] && same_losses "$one" "$fso" $steps "the FSDP form on DP$n (ZeRO-3 AdamW, gathered a layer at a time)" ||
        echo "not ok flat_trainer_fsdp: --dp $n: exit status $rc"
done
# 5. the diff sizes in README.md
bash tests/flat_trainer_diff.sh --stat --check README.md
