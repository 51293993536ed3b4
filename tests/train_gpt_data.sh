#!/usr/bin/env bash
# examples/train_gpt.c --data (issue 23): tools/vescale-shards writes token shards
# from README.md (the GPT's 64-token character vocabulary, no download); the GPT
# trains on them for 30 steps on PP1 x DP2 x TP2 (each DP rank reads its rows,
# shuffled by epoch) beside one rank reading the whole batches: every loss within
# 1e-5 of one rank's, and the loss falls by more than 0.5. Saved, then resumed on
# DP4 and on PP2 x TP2: train_gpt compares each resumed step with one rank that
# trained from step 0 on the same stream, so the resumed run must continue the
# token stream exactly (another batch would give another loss). Prints
# "ok/not ok example/train_gpt_data ..." lines.
set -u
B=${B:-build}
bin=$B/train_gpt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
say() { # ok?, what
    if [ "$1" = 1 ]; then echo "ok example/train_gpt_data $2"; else echo "not ok example/train_gpt_data $2"; fails=$((fails + 1)); fi
}

"$B/vescale-shards" --shard-tokens 8000 "$tmp/readme" README.md >"$tmp/shards.log" 2>&1
say "$([ $? = 0 ] && [ "$(ls "$tmp"/readme_*.bin | wc -l)" -ge 2 ] && echo 1)" "shards from README.md: $(tail -1 "$tmp/shards.log")"

"$bin" --mesh 1x2x2 --data "$tmp/readme_*.bin" --shuffle 7 --steps 30 --save "$tmp/ck/step-000030" >"$tmp/train.log" 2>&1
rc=$?
line=$(grep '^loss ' "$tmp/train.log")
falls=$(echo "$line" | awk '{ print ($4 + 0 < $2 - 0.5) ? 1 : 0 }')
say "$([ $rc = 0 ] && [ "$falls" = 1 ] && echo 1)" "30 steps on 1x2x2 beside one rank, the loss falls: $line (status $rc)"
[ $rc = 0 ] || tail -5 "$tmp/train.log"

for mesh in 1x4x1 2x1x2; do
    "$bin" --mesh $mesh --data "$tmp/readme_*.bin" --shuffle 7 --steps 6 --resume "$tmp/ck/step-000030" >"$tmp/resume.log" 2>&1
    rc=$?
    say "$([ $rc = 0 ] && grep -q 'over steps 30..35 on .*: equals one rank' "$tmp/resume.log" && echo 1)" \
        "resumed on $mesh: $(grep '^loss ' "$tmp/resume.log") (status $rc)"
    [ $rc = 0 ] || tail -5 "$tmp/resume.log"
done
[ $fails = 0 ]
