#!/usr/bin/env bash
# examples/train_gpt.c --elastic (issue 24) on 8 thread ranks, PP1 x DP4 x TP2 and
# PP2 x DP4 x TP1: world rank R dies in the middle of step 2 (--kill R@2); the
# survivors shrink the mesh by its DP replica (DP 4 -> 3), move the state in
# memory and take step 2 again; a replacement starts at step 4 (--replace 4)
# and the mesh grows back to DP 4. Every step's loss, each printed once,
# equals the uninterrupted run's (the same options without --kill, run here)
# within 1e-5 relative, and the table shows the shrink (the failed rank, the
# mesh before and after), the time to the next completed step and the grow
# (the ranks that left, back). Also: the printing rank (world rank 0) killed and
# no replacement (the job ends on DP 3); ZeRO-1, whose lost optimizer shards
# come from the checkpoint of --save-every 1, grown back at the last step; HSDP ZeRO-3, whose
# failed DPR replica leaves while the other holds its shards; --data, whose loader moves
# with the state; --kill without --elastic ends
# the job naming the killed rank. Prints "ok/not ok example/train_gpt_elastic ..." lines.
set -u
. "$(dirname "$0")/train_gpt_common.sh" train_gpt_elastic # (B, bin, tmp, fails, say)
steps=7
# "step loss" for each row of the table
losses() { sed -n '/^  step   loss/,$p' "$1" | awk '$1 ~ /^[0-9]+$/ && NF == 7 { print $1, $2 }'; }
# against the uninterrupted run: "ok <largest relative difference>", or what differs
compare() { # run.log ref.log
    awk -v steps=$steps 'NR == FNR { ref[$1] = $2; next }
        { n[$1]++; d = $2 - ref[$1]; d = d < 0 ? -d : d; r = d / ref[$1]; if (r > worst) worst = r
          if (!($1 in ref) || r > 1e-5) bad = bad sprintf(" step %s: %s, uninterrupted %s;", $1, $2, ref[$1]) }
        END { for (s = 0; s < steps; s++) if (n[s] != 1) bad = bad sprintf(" step %d printed %d times;", s, n[s])
              if (bad != "") print "DIFFERS:" bad; else printf "ok %.1e\n", worst }' <(losses "$2") <(losses "$1")
}
show() { echo "--- exit status $1; output:"; cat "$2"; }

for mesh in 1x4x2 2x4x1; do
    pp=${mesh%%x*} tp=${mesh##*x}
    victim=$([ "$pp" = 1 ] && echo 3 || echo 2) # (PP2: a stage-0 rank)
    ref=$tmp/ref-$mesh.log
    "$bin" --mesh $mesh --elastic --steps $steps --no-reference >"$ref" 2>&1
    rc=$?
    say "$([ $rc = 0 ] && [ "$(losses "$ref" | wc -l)" = $steps ] && echo 1)" "$mesh --elastic, uninterrupted: $(grep '^loss' "$ref") (status $rc)"
    [ $rc = 0 ] || show $rc "$ref"

    "$bin" --mesh $mesh --elastic --kill $victim@2 --replace 4 --steps $steps >"$tmp/run.log" 2>&1
    rc=$?
    cmp=$(compare "$tmp/run.log" "$ref")
    shrink=$(grep -E "^  elastic: step 2: world rank $victim failed; world ranks? [0-9 ]+ left with the DP replica: \(PP=$pp, DP=4, TP=$tp\) -> \(PP=$pp, DP=3, TP=$tp\)$" "$tmp/run.log")
    recovered=$(grep -E "^  elastic: [0-9.]+ ms from the failure to step 2 done again" "$tmp/run.log")
    started=$(grep -c "^  elastic: step 4: a replacement for world rank $victim starts$" "$tmp/run.log")
    grow=$(grep -E "^  elastic: step [4-6]: world ranks [0-9 ]+ joined: \(PP=$pp, DP=3, TP=$tp\) -> \(PP=$pp, DP=4, TP=$tp\)" "$tmp/run.log")
    # the ranks that came back: the victim's replacement and the ranks that left with its replica
    left=$(echo "$shrink" | sed -n 's/.*failed; world ranks\{0,1\} \([0-9 ]*\) left.*/\1/p')
    back=$(echo "$grow" | sed -n 's/.*world ranks \([0-9 ]*\) joined.*/\1/p')
    same=$([ "$(echo $left $victim | tr ' ' '\n' | sort -n | tr '\n' ' ')" = "$(echo $back | tr ' ' '\n' | sort -n | tr '\n' ' ')" ] && [ "$(echo $back | wc -w)" = $((pp * tp)) ] && echo 1)
    ok=$([ $rc = 0 ] && [ "${cmp%% *}" = ok ] && [ -n "$shrink" ] && [ -n "$recovered" ] && [ "$started" = 1 ] && [ -n "$grow" ] && [ "$same" = 1 ] && grep -q "equals one rank within 1e-5" "$tmp/run.log" && echo 1)
    say "$ok" "$mesh --elastic --kill $victim@2 --replace 4: every step equals the uninterrupted run ($cmp); shrink: ${shrink#  elastic: }; ${recovered#  elastic: }; grow: ${grow#  elastic: } (status $rc)"
    [ "$ok" = 1 ] || show $rc "$tmp/run.log"
done

# the printing rank dies, no replacement: the job ends on DP 3 (world rank 2 prints from step 2)
"$bin" --mesh 1x4x2 --elastic --kill 0@2 --steps $steps --no-reference >"$tmp/run.log" 2>&1
rc=$?
cmp=$(compare "$tmp/run.log" "$tmp/ref-1x4x2.log")
shrink=$(grep -E "^  elastic: step 2: world rank 0 failed; world rank 1 left with the DP replica: \(PP=1, DP=4, TP=2\) -> \(PP=1, DP=3, TP=2\)$" "$tmp/run.log")
ok=$([ $rc = 0 ] && [ "${cmp%% *}" = ok ] && [ -n "$shrink" ] && ! grep -q joined "$tmp/run.log" && echo 1)
say "$ok" "1x4x2 --elastic --kill 0@2 (the printing rank), no replacement: $cmp, ended on DP 3 (status $rc)"
[ "$ok" = 1 ] || show $rc "$tmp/run.log"

# the same options run twice, uninterrupted and with --kill V@2 --replace G: every loss equal,
# the failure and the grow-back in the table
kill_and_grow() { # label victim grow-step options...
    local label=$1 v=$2 g=$3 rc cmp ok
    shift 3
    "$bin" "$@" --elastic --ckpt-dir "$tmp/ck-ref" --steps $steps --no-reference >"$tmp/ref.log" 2>&1
    "$bin" "$@" --elastic --ckpt-dir "$tmp/ck-run" --kill $v@2 --replace $g --steps $steps --no-reference >"$tmp/run.log" 2>&1
    rc=$?
    cmp=$(compare "$tmp/run.log" "$tmp/ref.log")
    # (the grow: at the first step boundary from g where the replacement waits; the last one at the latest)
    grow=$(grep -oE "^  elastic: step [0-9]+: world ranks [0-9 ]+ joined" "$tmp/run.log" | grep -oE "step [0-9]+")
    ok=$([ $rc = 0 ] && [ "${cmp%% *}" = ok ] && grep -q "world rank $v failed" "$tmp/run.log" && [ -n "$grow" ] && [ "${grow#step }" -ge $g ] && echo 1)
    say "$ok" "$label --kill $v@2 --replace $g: $cmp, grown back at ${grow:-no step} (status $rc)"
    [ "$ok" = 1 ] || show $rc "$tmp/run.log"
}

# ZeRO-1: the failed replica's optimizer shards from the newest checkpoint (one a step); the
# replacement starts at the last step, which grows at once (vs_world_grow waits for it)
kill_and_grow "1x4x2 --elastic --zero 1 --save-every 1" 5 6 --mesh 1x4x2 --zero 1 --save-every 1

# HSDP ZeRO-3 (--dp-shard 2: DPR2 x DPS2 x TP2): the failed rank's whole DPR replica leaves, the other
# holds every shard (no checkpoint), the state is DP 2 over DPS until the replica comes back
kill_and_grow "1x4x2 --elastic --zero 3 --dp-shard 2" 5 4 --mesh 1x4x2 --zero 3 --dp-shard 2

# --data: the loader moves with the state (vs_train_reconfigure): the failed step's batch is read
# again on DP 3, the rank that left and the replacement open theirs at the others' position
if [ -x "$B/vescale-shards" ]; then
    mkdir -p "$tmp/sh" && "$B/vescale-shards" "$tmp/sh/readme" README.md >/dev/null
    for mesh in 1x4x2 2x4x1; do
        kill_and_grow "$mesh --elastic --data (the loader moves)" 3 4 --mesh $mesh --data "$tmp/sh/readme_*.bin"
    done
fi

# without --elastic a killed rank ends the job, as any fault does
"$bin" --mesh 1x4x2 --kill 3@2 --steps $steps --no-reference >"$tmp/run.log" 2>&1
rc=$?
ok=$([ $rc = 1 ] && grep -q "^vs_launch: world rank 3 failed (VS_ERR_INVALID): .*killed by --kill" "$tmp/run.log" && ! grep -q "elastic:" "$tmp/run.log" && echo 1)
say "$ok" "1x4x2 --kill 3@2 without --elastic: the job ends (status $rc): $(grep -o '^vs_launch: world rank 3 failed ([A-Z_]*)' "$tmp/run.log")"
[ "$ok" = 1 ] || show $rc "$tmp/run.log"
[ $fails = 0 ]
