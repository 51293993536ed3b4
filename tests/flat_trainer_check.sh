#!/usr/bin/env bash
# tests/flat_trainer_check.sh - examples/flat_trainer.c both ways (issue 22.7):
#   1. the single-device trainer (its own AdamW, no vescale): its loss falls;
#   2. its vescale port on DP2 x TP2 thread ranks beside one rank: within 1e-6 (its verdict);
#   3. the port on one rank reproduces the single-device trainer's losses within 1e-6;
#   4. README.md states the size of the diff between the two forms.
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
# 3. the one-rank column against the single-device trainer, step by step
paste <(echo "$one" | awk 'NR > 1 { print $1, $2 }') <(echo "$par" | awk 'NR > 1 && $1 ~ /^[0-9]+$/ { print $1, $2 }') |
    awk -v n=$steps '{ rel = ($4 - $2) / $2; if (rel < 0) rel = -rel; if ($1 != $3) bad = 1; if (rel > worst) worst = rel; rows++ }
        END { if (!bad && rows == n && worst <= 1e-6)
                  printf "ok flat_trainer: vescale on one rank (ZeRO-1 AdamW) equals the trainer'"'"'s own AdamW within %.2g (bar 1e-6)\n", worst;
              else printf "not ok flat_trainer: one-rank port vs single device: %d rows, largest relative difference %.3g (bar 1e-6)\n", rows, worst }'
# 4. the diff size in README.md
bash tests/flat_trainer_diff.sh --stat --check README.md
